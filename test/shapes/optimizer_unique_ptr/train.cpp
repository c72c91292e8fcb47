// Optimizer created on the heap and used through a std::unique_ptr, as code
// does when the optimizer type is decided at run time or owned by a class.
#include <torch/torch.h>

#include <cstdio>
#include <memory>

struct RegressorImpl : torch::nn::Module {
  RegressorImpl() {
    net = register_module(
        "net", torch::nn::Sequential(torch::nn::Linear(2, 32), torch::nn::ReLU(),
                                     torch::nn::Linear(32, 32), torch::nn::ReLU(),
                                     torch::nn::Linear(32, 1)));
  }
  torch::Tensor forward(torch::Tensor x) { return net->forward(x); }
  torch::nn::Sequential net{nullptr};
};
TORCH_MODULE(Regressor);

// y = 2 x0 - x1 + 0.5 x0 x1, observed with noise of std 0.3
struct PlaneData : torch::data::datasets::Dataset<PlaneData> {
  explicit PlaneData(int64_t n) {
    inputs = torch::rand({n, 2}) * 2 - 1;
    auto a = inputs.select(1, 0), b = inputs.select(1, 1);
    targets = (2 * a - b + 0.5 * a * b).unsqueeze(-1) + 0.3 * torch::randn({n, 1});
  }
  torch::data::Example<> get(size_t i) override { return {inputs[i], targets[i]}; }
  torch::optional<size_t> size() const override { return inputs.size(0); }
  torch::Tensor inputs, targets;
};

int main() {
  torch::manual_seed(3);
  const torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);

  Regressor model;
  model->to(device);
  auto optimizer = std::make_unique<torch::optim::Adam>(model->parameters(),
                                                        torch::optim::AdamOptions(3e-3));

  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      PlaneData(1024).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(32));
  auto eval_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      PlaneData(256).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(64));

  for (int epoch = 0; epoch < 15; ++epoch) {
    double running = 0.0;
    int n = 0;
    for (auto& batch : *train_loader) {
      optimizer->zero_grad();
      auto prediction = model->forward(batch.data.to(device));
      auto loss = torch::mse_loss(prediction, batch.target.to(device));
      loss.backward();
      optimizer->step();
      running += loss.item<double>();
      ++n;
    }
    std::printf("epoch %d loss %.4f\n", epoch, running / n);
  }

  torch::NoGradGuard no_grad;
  double mse = 0.0;
  int batches = 0;
  for (auto& batch : *eval_loader) {
    mse += torch::mse_loss(model->forward(batch.data.to(device)), batch.target.to(device))
               .item<double>();
    ++batches;
  }
  std::printf("test loss %.4f\n", mse / batches);
  return 0;
}
