// A data set class of the program's own (size() and get(i), no torch::data):
// batches are gathered sample by sample and stacked in the training loop.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <vector>

// Points on two interleaved spirals with a third "ring" class; about 8% of
// the labels are wrong.
class SpiralDataset {
 public:
  struct Sample {
    torch::Tensor x;  // [2]
    torch::Tensor y;  // scalar, long
  };

  explicit SpiralDataset(int64_t n) {
    auto labels = torch::randint(3, {n}, torch::kLong);
    auto t = torch::rand({n}) * 3.0 + 0.5;
    auto angle = t * 2.0 + labels.to(torch::kFloat) * (2.0 * M_PI / 3.0);
    auto r = t * 0.8;
    auto noise = torch::randn({n, 2}) * 0.15;
    points_ = torch::stack({r * torch::cos(angle), r * torch::sin(angle)}, 1) + noise;
    auto wrong = torch::rand({n}) < 0.08;
    auto other = torch::randint(3, {n}, torch::kLong);
    labels_ = torch::where(wrong, other, labels);
  }

  size_t size() const { return static_cast<size_t>(labels_.size(0)); }

  Sample get(size_t i) const {
    const auto k = static_cast<int64_t>(i);
    return {points_[k], labels_[k]};
  }

 private:
  torch::Tensor points_, labels_;
};

struct SpiralNet : torch::nn::Module {
  SpiralNet() {
    l1 = register_module("l1", torch::nn::Linear(2, 64));
    l2 = register_module("l2", torch::nn::Linear(64, 64));
    l3 = register_module("l3", torch::nn::Linear(64, 3));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::tanh(l1(x));
    x = torch::tanh(l2(x));
    return l3(x);
  }
  torch::nn::Linear l1{nullptr}, l2{nullptr}, l3{nullptr};
};

int main() {
  torch::manual_seed(31);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  SpiralDataset train(1024);
  SpiralDataset test(512);
  const size_t batch_size = 32;

  auto net = std::make_shared<SpiralNet>();
  net->to(device);
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(1e-2));

  for (int epoch = 1; epoch <= 20; ++epoch) {
    net->train();
    double epoch_loss = 0;
    int64_t epoch_correct = 0;
    int num_batches = 0;
    for (size_t start = 0; start < train.size(); start += batch_size) {
      std::vector<torch::Tensor> xs, ys;
      for (size_t j = start; j < std::min(start + batch_size, train.size()); ++j) {
        auto s = train.get(j);
        xs.push_back(s.x);
        ys.push_back(s.y);
      }
      auto x = torch::stack(xs).to(device);
      auto y = torch::stack(ys).to(device);

      optimizer.zero_grad();
      auto output = net->forward(x);
      auto loss = torch::nn::functional::cross_entropy(output, y);
      loss.backward();
      optimizer.step();

      epoch_loss += loss.item<double>();
      epoch_correct += output.argmax(1).eq(y).sum().item<int64_t>();
      ++num_batches;
    }
    std::cout << "epoch " << epoch << " loss " << epoch_loss / num_batches << " acc "
              << static_cast<double>(epoch_correct) / train.size() << std::endl;
  }

  torch::NoGradGuard no_grad;
  net->eval();
  double test_loss = 0;
  int64_t correct = 0;
  for (size_t start = 0; start < test.size(); start += 128) {
    std::vector<torch::Tensor> xs, ys;
    for (size_t j = start; j < std::min(start + 128, test.size()); ++j) {
      auto s = test.get(j);
      xs.push_back(s.x);
      ys.push_back(s.y);
    }
    auto x = torch::stack(xs).to(device);
    auto y = torch::stack(ys).to(device);
    auto output = net->forward(x);
    test_loss += torch::nn::functional::cross_entropy(
                     output, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                     .item<double>();
    correct += output.argmax(1).eq(y).sum().item<int64_t>();
  }
  std::cout << "test loss " << test_loss / test.size() << " acc " << static_cast<double>(correct) / test.size()
            << std::endl;
  return 0;
}
