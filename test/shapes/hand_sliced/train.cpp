// Whole data set held in two tensors; batches cut by hand with a randperm
// per epoch (index_select), then a short second phase that walks the data in
// order with narrow(), and a test pass over slices of the test tensors.
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

struct Net : torch::nn::Module {
  Net(int64_t in, int64_t hidden, int64_t out) {
    fc1 = register_module("fc1", torch::nn::Linear(in, hidden));
    fc2 = register_module("fc2", torch::nn::Linear(hidden, hidden));
    fc3 = register_module("fc3", torch::nn::Linear(hidden, out));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(fc1->forward(x));
    x = torch::relu(fc2->forward(x));
    return fc3->forward(x);
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};

// Labels from a fixed random teacher, 10% of them replaced by random classes.
void make_data(const torch::Tensor& teacher, int64_t n, torch::Tensor& X, torch::Tensor& Y) {
  X = torch::randn({n, teacher.size(0)});
  Y = torch::tanh(X.matmul(teacher)).argmax(1);
  auto flip = torch::rand({n}) < 0.1;
  auto random_labels = torch::randint(teacher.size(1), {n}, torch::kLong);
  Y = torch::where(flip, random_labels, Y);
}

// Phase 2: one pass over the data in order, batch b = rows [b*bs, b*bs+bs).
double train_in_order(Net& net, torch::optim::Optimizer& optimizer, const torch::Tensor& X,
                      const torch::Tensor& Y, int64_t bs, torch::Device device) {
  const int64_t n = X.size(0);
  const int num_batches = static_cast<int>(n / bs);
  double total = 0;
  for (int b = 0; b < num_batches; ++b) {
    int64_t start = b * bs;
    auto xb = X.narrow(0, start, bs).to(device);
    auto yb = Y.narrow(0, start, bs).to(device);
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net.forward(xb), yb);
    loss.backward();
    optimizer.step();
    total += loss.item<double>();
  }
  return total / num_batches;
}

int main() {
  torch::manual_seed(2024);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  const int64_t dim = 12, classes = 3;
  auto teacher = torch::randn({dim, classes});
  torch::Tensor X, Y, X_test, Y_test;
  make_data(teacher, 2048, X, Y);
  make_data(teacher, 512, X_test, Y_test);
  const int64_t n = X.size(0);
  const int64_t batch_size = 32;

  Net net(dim, 64, classes);
  net.to(device);
  torch::optim::Adam optimizer(net.parameters(), torch::optim::AdamOptions(2e-3));

  for (int epoch = 1; epoch <= 6; ++epoch) {
    net.train();
    auto perm = torch::randperm(n);
    double loss_sum = 0;
    int64_t correct = 0, seen = 0;
    int batches = 0;
    for (int64_t i = 0; i < n; i += batch_size) {
      auto idx = perm.slice(0, i, std::min(i + batch_size, n));
      auto x = X.index_select(0, idx).to(device);
      auto y = Y.index_select(0, idx).to(device);
      optimizer.zero_grad();
      auto logits = net.forward(x);
      auto loss = torch::nn::functional::cross_entropy(logits, y);
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
      correct += logits.argmax(1).eq(y).sum().item<int64_t>();
      seen += y.size(0);
      ++batches;
    }
    std::printf("epoch %d loss %.4f acc %.4f\n", epoch, loss_sum / batches,
                static_cast<double>(correct) / seen);
  }

  // Phase 2: a lower learning rate, data in order.
  for (auto& group : optimizer.param_groups()) {
    static_cast<torch::optim::AdamOptions&>(group.options()).lr(5e-4);
  }
  for (int epoch = 1; epoch <= 2; ++epoch) {
    net.train();
    double loss = train_in_order(net, optimizer, X, Y, 64, device);
    std::printf("finetune %d loss %.4f\n", epoch, loss);
  }

  // Test: slices of the test tensors, sums divided by the test size.
  torch::NoGradGuard no_grad;
  net.eval();
  const int64_t n_test = X_test.size(0);
  const int64_t eval_bs = 128;
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < n_test; i += eval_bs) {
    auto x = X_test.slice(0, i, i + eval_bs).to(device);
    auto y = Y_test.slice(0, i, i + eval_bs).to(device);
    auto logits = net.forward(x);
    loss_sum += torch::nn::functional::cross_entropy(
                    logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .item<double>();
    correct += logits.argmax(1).eq(y).sum().item<int64_t>();
  }
  std::printf("test loss %.4f acc %.4f\n", loss_sum / n_test, static_cast<double>(correct) / n_test);
  return 0;
}
