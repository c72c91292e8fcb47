// A single-device regression that prints the dtype its forward computes in,
// in training and in an evaluation helper: after migration the precision
// chosen at run time (LT_PRECISION=bf16-mixed) must reach both forwards with
// no source change (issue 27 point 1; test/e2e/precision_probe.py).
#include <torch/torch.h>

#include <cstdio>
#include <iostream>

struct Pairs : torch::data::datasets::Dataset<Pairs> {
  Pairs(torch::Tensor x, torch::Tensor y) : x(std::move(x)), y(std::move(y)) {}
  torch::data::Example<> get(size_t index) override { return {x[index], y[index]}; }
  torch::optional<size_t> size() const override { return static_cast<size_t>(x.size(0)); }
  torch::Tensor x, y;
};

struct RegressorImpl : torch::nn::Module {
  RegressorImpl() {
    hidden = register_module("hidden", torch::nn::Linear(8, 32));
    out = register_module("out", torch::nn::Linear(32, 1));
  }
  torch::Tensor forward(torch::Tensor x) { return out(torch::relu(hidden(x))); }
  torch::nn::Linear hidden{nullptr}, out{nullptr};
};
TORCH_MODULE(Regressor);

double evaluate(Regressor& model, const torch::Tensor& x, const torch::Tensor& y) {
  torch::NoGradGuard no_grad;
  auto prediction = model->forward(x);
  std::cout << "eval dtype " << prediction.scalar_type() << std::endl;
  return torch::mse_loss(prediction, y).item<double>();
}

int main() {
  torch::manual_seed(3);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  auto x = torch::randn({512, 8});
  auto y = x.narrow(1, 0, 2).sum(1, true).sin() + 0.3 * torch::randn({512, 1});
  auto test_x = torch::randn({128, 8});
  auto test_y = test_x.narrow(1, 0, 2).sum(1, true).sin() + 0.3 * torch::randn({128, 1});
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Pairs(x, y).map(torch::data::transforms::Stack<>()), 32);
  Regressor model;
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), 1e-2);
  for (int epoch = 1; epoch <= 4; ++epoch) {
    double total = 0;
    int batches = 0;
    for (auto& batch : *loader) {
      auto data = batch.data.to(device), target = batch.target.to(device);
      optimizer.zero_grad();
      auto prediction = model->forward(data);
      if (epoch == 1 && batches == 0) std::cout << "train dtype " << prediction.scalar_type() << std::endl;
      auto loss = torch::mse_loss(prediction, target);
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
      ++batches;
    }
    std::printf("epoch %d loss %.4f\n", epoch, total / batches);
  }
  const double test_loss = evaluate(model, test_x.to(device), test_y.to(device));
  std::cout << "test loss " << test_loss << std::endl;
  return 0;
}
