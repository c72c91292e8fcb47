// Fits a small MLP to a noisy nonlinear function of 4 inputs.
// The model is a plain torch::nn::Module held by value, the way PyTorch's
// own C++ MNIST example holds its Net.
#include <torch/torch.h>

#include <iostream>

// y = x . w + 0.5 * sin(2 * x0) + 0.3 * noise
class NoisyRegression : public torch::data::datasets::Dataset<NoisyRegression> {
 public:
  explicit NoisyRegression(int64_t n) {
    inputs_ = torch::randn({n, 4});
    auto w = torch::tensor({0.8, -1.2, 0.5, 0.3}, torch::kFloat);
    targets_ = (inputs_.matmul(w) + 0.5 * torch::sin(2 * inputs_.select(1, 0))).unsqueeze(1) +
               0.3 * torch::randn({n, 1});
  }

  torch::data::Example<> get(size_t index) override {
    return {inputs_[index], targets_[index]};
  }

  torch::optional<size_t> size() const override { return inputs_.size(0); }

 private:
  torch::Tensor inputs_, targets_;
};

struct Net : torch::nn::Module {
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(4, 32));
    fc2 = register_module("fc2", torch::nn::Linear(32, 32));
    fc3 = register_module("fc3", torch::nn::Linear(32, 1));
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::tanh(fc1->forward(x));
    x = torch::tanh(fc2->forward(x));
    return fc3->forward(x);
  }

  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};

int main() {
  torch::manual_seed(42);

  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);

  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      NoisyRegression(1024).map(torch::data::transforms::Stack<>()), /*batch_size=*/32);
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      NoisyRegression(256).map(torch::data::transforms::Stack<>()), /*batch_size=*/64);

  Net model;
  model.to(device);

  torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(0.02).momentum(0.9));
  // Decay the learning rate so the loss settles at the end of training.
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/10, /*gamma=*/0.3);

  const int kEpochs = 30;
  for (int epoch = 1; epoch <= kEpochs; ++epoch) {
    model.train();
    double epoch_loss = 0.0;
    int batches = 0;
    for (auto& batch : *train_loader) {
      auto data = batch.data.to(device);
      auto target = batch.target.to(device);

      optimizer.zero_grad();
      auto output = model.forward(data);
      auto loss = torch::mse_loss(output, target);
      loss.backward();
      optimizer.step();

      epoch_loss += loss.item<double>();
      ++batches;
    }
    scheduler.step();
    std::cout << "epoch " << epoch << " loss " << epoch_loss / batches << std::endl;
  }

  // Evaluate on held-out data.
  model.eval();
  torch::NoGradGuard no_grad;
  double test_loss = 0.0;
  int test_batches = 0;
  for (const auto& batch : *test_loader) {
    auto output = model.forward(batch.data.to(device));
    test_loss += torch::mse_loss(output, batch.target.to(device)).item<double>();
    ++test_batches;
  }
  std::cout << "test loss " << test_loss / test_batches << std::endl;
  return 0;
}
