// Classic epoch bookkeeping: running loss weighted by batch size, correct
// predictions and a sample count, then the same sums over the test set
// divided by its size.
#include <torch/torch.h>

#include <iomanip>
#include <iostream>

struct NetImpl : torch::nn::Module {
  NetImpl() : fc1(6, 32), fc2(32, 32), fc3(32, 2) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(fc1(x));
    x = torch::relu(fc2(x));
    return torch::log_softmax(fc3(x), 1);
  }
  torch::nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE(Net);

// Label: is a random hyperplane's score above a wavy threshold (10% flipped).
class Hyperplane : public torch::data::datasets::Dataset<Hyperplane> {
 public:
  Hyperplane(const torch::Tensor& normal, int64_t n) {
    x_ = torch::randn({n, 6});
    auto score = x_.matmul(normal) - 0.5 * torch::sin(2 * x_.select(1, 0));
    y_ = (score > 0).to(torch::kLong);
    auto flip = torch::rand({n}) < 0.1;
    y_ = torch::where(flip, 1 - y_, y_);
  }
  torch::data::Example<> get(size_t i) override { return {x_[i], y_[i]}; }
  torch::optional<size_t> size() const override { return x_.size(0); }

 private:
  torch::Tensor x_, y_;
};

int main() {
  torch::manual_seed(2023);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);

  auto normal = torch::randn({6});
  auto train_dataset = Hyperplane(normal, 2048).map(torch::data::transforms::Stack<>());
  auto test_dataset = Hyperplane(normal, 512).map(torch::data::transforms::Stack<>());
  const auto test_size = test_dataset.size().value();

  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(train_dataset), 64);
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(test_dataset), 128);

  Net model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));

  std::cout << std::fixed << std::setprecision(4);
  for (int epoch = 1; epoch <= 10; ++epoch) {
    model->train();
    float running_loss = 0.0f;
    int64_t correct = 0;
    int64_t total = 0;
    for (auto& batch : *train_loader) {
      auto data = batch.data.to(device);
      auto target = batch.target.to(device);
      const auto batch_size = data.size(0);

      optimizer.zero_grad();
      auto output = model->forward(data);
      auto loss = torch::nll_loss(output, target);
      loss.backward();
      optimizer.step();

      running_loss += loss.item<float>() * batch_size;
      auto pred = output.argmax(1);
      correct += pred.eq(target).sum().item<int64_t>();
      total += batch_size;
    }
    std::cout << "epoch " << epoch << " loss " << running_loss / total << " acc "
              << static_cast<float>(correct) / total << std::endl;
  }

  model->eval();
  torch::NoGradGuard no_grad;
  float test_loss = 0.0f;
  int64_t test_correct = 0;
  for (auto& batch : *test_loader) {
    auto data = batch.data.to(device);
    auto target = batch.target.to(device);
    auto output = model->forward(data);
    test_loss += torch::nll_loss(output, target, {}, torch::Reduction::Sum).item<float>();
    test_correct += output.argmax(1).eq(target).sum().item<int64_t>();
  }
  std::cout << "test loss " << test_loss / test_size << " acc "
            << static_cast<float>(test_correct) / test_size << std::endl;
  return 0;
}
