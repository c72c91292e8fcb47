// Batches come from the project's own little iterator over in-memory
// tensors (a shuffled index per epoch), not from torch::data.
#include <torch/torch.h>

#include <iostream>
#include <utility>

class BatchIterator {
 public:
  BatchIterator(torch::Tensor x, torch::Tensor y, int64_t batch_size, bool shuffle)
      : x_(std::move(x)), y_(std::move(y)), batch_size_(batch_size), shuffle_(shuffle) {
    reset();
  }

  // Starts a new pass over the data.
  void reset() {
    order_ = shuffle_ ? torch::randperm(x_.size(0), torch::kLong) : torch::arange(x_.size(0));
    cursor_ = 0;
  }

  bool has_next() const { return cursor_ < x_.size(0); }

  std::pair<torch::Tensor, torch::Tensor> next() {
    auto idx = order_.slice(0, cursor_, std::min(cursor_ + batch_size_, x_.size(0)));
    cursor_ += batch_size_;
    return {x_.index_select(0, idx), y_.index_select(0, idx)};
  }

  int64_t size() const { return x_.size(0); }

 private:
  torch::Tensor x_, y_, order_;
  int64_t batch_size_;
  bool shuffle_;
  int64_t cursor_ = 0;
};

struct Regressor : torch::nn::Module {
  torch::nn::Linear a{nullptr}, b{nullptr};
  Regressor() {
    a = register_module("a", torch::nn::Linear(3, 32));
    b = register_module("b", torch::nn::Linear(32, 1));
  }
  torch::Tensor forward(torch::Tensor x) { return b(torch::softplus(a(x))); }
};

int main() {
  torch::manual_seed(77);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  // y = |x0| + x1 - 0.5 x2 + noise
  auto make = [](int64_t n) {
    auto x = torch::randn({n, 3});
    auto y = x.select(1, 0).abs() + x.select(1, 1) - 0.5 * x.select(1, 2) + 0.3 * torch::randn({n});
    return std::make_pair(x, y.unsqueeze(1));
  };
  auto [x_train, y_train] = make(1024);
  auto [x_test, y_test] = make(256);

  BatchIterator train_batches(x_train, y_train, 32, /*shuffle=*/true);
  BatchIterator test_batches(x_test, y_test, 128, /*shuffle=*/false);

  auto model = std::make_shared<Regressor>();
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), 5e-3);

  for (int epoch = 0; epoch < 15; ++epoch) {
    train_batches.reset();
    double loss_sum = 0;
    int steps = 0;
    while (train_batches.has_next()) {
      auto [x, y] = train_batches.next();
      x = x.to(device);
      y = y.to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
      ++steps;
    }
    std::cout << "epoch " << epoch << " loss " << loss_sum / steps << '\n';
  }

  torch::NoGradGuard no_grad;
  double sq = 0;
  test_batches.reset();
  while (test_batches.has_next()) {
    auto [x, y] = test_batches.next();
    sq += (model->forward(x.to(device)) - y.to(device)).pow(2).sum().item<double>();
  }
  std::cout << "test loss " << sq / test_batches.size() << std::endl;
  return 0;
}
