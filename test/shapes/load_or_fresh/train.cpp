// Resumes from checkpoint.pt when one exists, starts from scratch otherwise,
// and leaves an updated checkpoint behind for the next run.
#include <torch/torch.h>

#include <iostream>
#include <string>

struct LinearModelImpl : torch::nn::Module {
  LinearModelImpl() {
    hidden = register_module("hidden", torch::nn::Linear(5, 24));
    output = register_module("output", torch::nn::Linear(24, 1));
  }
  torch::Tensor forward(torch::Tensor x) { return output(torch::elu(hidden(x))); }
  torch::nn::Linear hidden{nullptr}, output{nullptr};
};
TORCH_MODULE(LinearModel);

class Samples : public torch::data::datasets::Dataset<Samples> {
 public:
  Samples(const torch::Tensor& coef, int64_t n) : x_(torch::randn({n, 5})) {
    y_ = x_.matmul(coef).unsqueeze(1) + 0.3 * torch::cos(3 * x_.narrow(1, 0, 1)) +
         0.3 * torch::randn({n, 1});
  }
  torch::data::Example<> get(size_t i) override { return {x_[i], y_[i]}; }
  torch::optional<size_t> size() const override { return x_.size(0); }

 private:
  torch::Tensor x_, y_;
};

int main() {
  torch::manual_seed(21);
  const std::string checkpoint = "checkpoint.pt";
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);

  LinearModel model;
  try {
    torch::load(model, checkpoint);
    std::cout << "resumed\n";
  } catch (const c10::Error& e) {
    std::cout << "starting fresh\n";
  }
  model->to(device);

  auto coef = torch::tensor({1.0f, -0.5f, 0.25f, 0.0f, 2.0f});
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Samples(coef, 1024).map(torch::data::transforms::Stack<>()), 32);
  auto test_loader = torch::data::make_data_loader(
      Samples(coef, 256).map(torch::data::transforms::Stack<>()), 64);

  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(5e-3));

  for (int epoch = 1; epoch <= 12; ++epoch) {
    double total = 0;
    int count = 0;
    for (auto& batch : *train_loader) {
      auto inputs = batch.data.to(device);
      auto targets = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(inputs), targets);
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
      ++count;
    }
    std::cout << "epoch " << epoch << " loss " << total / count << std::endl;
  }
  torch::save(model, checkpoint);

  torch::NoGradGuard no_grad;
  double test_loss = 0;
  int batches = 0;
  for (auto& batch : *test_loader) {
    test_loss += torch::mse_loss(model->forward(batch.data.to(device)), batch.target.to(device))
                     .item<double>();
    ++batches;
  }
  std::cout << "test loss " << test_loss / batches << std::endl;
  return 0;
}
