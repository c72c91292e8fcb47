// A single-device LibTorch program, written the way LibTorch tutorials write
// them: a small MLP learns y = sin(3x) + noise. fabricize migrates it in the
// README's first command; the end-to-end tests compare the migrated program
// with this one.
#include <torch/torch.h>

#include <cmath>
#include <iostream>

// 2048 points of a noisy sine curve.
class SineDataset : public torch::data::datasets::Dataset<SineDataset> {
 public:
  explicit SineDataset(int64_t samples) {
    auto gen = torch::make_generator<torch::CPUGeneratorImpl>(42);
    x_ = torch::rand({samples, 1}, gen) * 4 - 2;
    y_ = torch::sin(3 * x_) + 0.05 * torch::randn({samples, 1}, gen);
  }
  torch::data::Example<> get(size_t i) override {
    return {x_[static_cast<int64_t>(i)], y_[static_cast<int64_t>(i)]};
  }
  torch::optional<size_t> size() const override { return x_.size(0); }

 private:
  torch::Tensor x_, y_;
};

struct MLPImpl : torch::nn::Module {
  MLPImpl()
      : fc1(register_module("fc1", torch::nn::Linear(1, 64))),
        fc2(register_module("fc2", torch::nn::Linear(64, 64))),
        out(register_module("out", torch::nn::Linear(64, 1))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::tanh(fc1(x));
    x = torch::tanh(fc2(x));
    return out(x);
  }

  torch::nn::Linear fc1, fc2, out;
};
TORCH_MODULE(MLP);

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 8;
  torch::manual_seed(0);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      SineDataset(2048).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(64));

  MLP model;
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));

  for (int epoch = 0; epoch < epochs; ++epoch) {
    double total = 0;
    int64_t batches = 0;
    for (auto& batch : *loader) {
      auto x = batch.data.to(device);
      auto y = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
      ++batches;
    }
    std::cout << "epoch " << epoch << " loss " << total / batches << std::endl;
  }
  torch::save(model, "sine_mlp.pt");
  return 0;
}
