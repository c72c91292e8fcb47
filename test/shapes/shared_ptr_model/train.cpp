// Regression of a noisy 3-input function with a model owned through a
// std::shared_ptr (torch::nn::Module subclass, no TORCH_MODULE holder).
#include <torch/torch.h>

#include <cstdio>
#include <memory>

struct Net : torch::nn::Module {
  explicit Net(int64_t hidden = 64) {
    l1 = register_module("l1", torch::nn::Linear(3, hidden));
    l2 = register_module("l2", torch::nn::Linear(hidden, 1));
  }
  torch::Tensor forward(torch::Tensor x) { return l2->forward(torch::gelu(l1->forward(x))); }

  torch::nn::Linear l1{nullptr}, l2{nullptr};
};

// Samples of y = sin(x0) + x1 * x2 / 2 + 0.3 * eps
struct WaveDataset : torch::data::datasets::Dataset<WaveDataset> {
  torch::Tensor x, y;

  explicit WaveDataset(int64_t n) : x(torch::rand({n, 3}) * 4 - 2) {
    auto clean = torch::sin(x.select(1, 0)) + x.select(1, 1) * x.select(1, 2) / 2;
    y = (clean + 0.3 * torch::randn({n})).unsqueeze(1);
  }
  torch::data::Example<> get(size_t idx) override { return {x[idx], y[idx]}; }
  torch::optional<size_t> size() const override { return x.size(0); }
};

int main() {
  torch::manual_seed(2024);
  auto device = torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);

  auto model = std::make_shared<Net>();
  model->to(device);

  auto train_set = WaveDataset(1536).map(torch::data::transforms::Stack<>());
  auto test_set = WaveDataset(512).map(torch::data::transforms::Stack<>());
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(train_set), 48);
  auto test_loader = torch::data::make_data_loader(std::move(test_set), 128);

  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(5e-3));

  for (int epoch = 1; epoch <= 15; epoch++) {
    double sum = 0;
    size_t count = 0;
    for (auto& b : *loader) {
      auto pred = model->forward(b.data.to(device));
      auto loss = torch::mse_loss(pred, b.target.to(device));
      opt.zero_grad();
      loss.backward();
      opt.step();
      sum += loss.item<double>();
      count++;
    }
    std::printf("epoch %d loss %.5f\n", epoch, sum / count);
  }

  torch::NoGradGuard guard;
  model->eval();
  double err = 0;
  size_t n = 0;
  for (auto& b : *test_loader) {
    auto pred = model->forward(b.data.to(device));
    err += torch::mse_loss(pred, b.target.to(device), torch::Reduction::Sum).item<double>();
    n += b.data.size(0);
  }
  std::printf("test loss %.5f\n", err / n);
  return 0;
}
