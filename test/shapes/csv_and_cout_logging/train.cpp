// Logging the way it grows in a real program: progress on std::cout, a
// printf summary, a CSV file for plotting and warnings on std::cerr.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

struct Net : torch::nn::Module {
  Net() : l1(register_module("l1", torch::nn::Linear(1, 40))),
          l2(register_module("l2", torch::nn::Linear(40, 40))),
          l3(register_module("l3", torch::nn::Linear(40, 1))) {}
  torch::Tensor forward(torch::Tensor x) {
    return l3(torch::tanh(l2(torch::tanh(l1(x)))));
  }
  torch::nn::Linear l1, l2, l3;
};

// y = sin(2x) on [-pi, pi] with noise 0.3
class Sine : public torch::data::datasets::Dataset<Sine> {
  torch::Tensor x_, y_;

 public:
  explicit Sine(int64_t n) {
    x_ = (torch::rand({n, 1}) * 2 - 1) * M_PI;
    y_ = torch::sin(2 * x_) + 0.3 * torch::randn({n, 1});
  }
  torch::data::Example<> get(size_t i) override { return {x_[i], y_[i]}; }
  torch::optional<size_t> size() const override { return x_.size(0); }
};

int main() {
  torch::manual_seed(271);
  if (!torch::cuda::is_available()) {
    std::cerr << "warning: CUDA not available, training on the CPU" << std::endl;
  }
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);

  auto net = std::make_shared<Net>();
  net->to(device);
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-2));

  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Sine(1024).map(torch::data::transforms::Stack<>()), 32);
  auto test_loader = torch::data::make_data_loader(
      Sine(256).map(torch::data::transforms::Stack<>()), 128);

  std::ofstream log("metrics.csv");
  log << "epoch,loss,grad_norm\n";

  double best = INFINITY;
  for (int epoch = 1; epoch <= 25; ++epoch) {
    double loss_sum = 0, grad_sum = 0;
    int steps = 0;
    for (auto& batch : *loader) {
      auto x = batch.data.to(device), y = batch.target.to(device);
      opt.zero_grad();
      auto loss = torch::mse_loss(net->forward(x), y);
      loss.backward();
      double norm = 0;
      for (const auto& p : net->parameters()) norm += p.grad().pow(2).sum().item<double>();
      grad_sum += std::sqrt(norm);
      opt.step();
      loss_sum += loss.item<double>();
      ++steps;
    }
    const double epoch_loss = loss_sum / steps;
    std::cout << "epoch " << epoch << " loss " << epoch_loss << std::endl;
    log << epoch << ',' << epoch_loss << ',' << grad_sum / steps << '\n';
    if (epoch > 5 && epoch_loss > 1.5 * best) {
      std::cerr << "warning: loss went up at epoch " << epoch << std::endl;
    }
    best = std::min(best, epoch_loss);
  }
  log.close();

  torch::NoGradGuard no_grad;
  float sse = 0.f;
  int64_t seen = 0;
  for (auto& batch : *test_loader) {
    auto pred = net->forward(batch.data.to(device));
    sse += (pred - batch.target.to(device)).pow(2).sum().item<float>();
    seen += pred.size(0);
  }
  printf("test loss %.4f (best train loss %.4f)\n", sse / seen, best);
  return 0;
}
