// Fine-tuning style optimizer setup: the backbone learns slowly, the head
// quickly, through two parameter groups of one Adam optimizer.
#include <torch/torch.h>

#include <iomanip>
#include <iostream>
#include <memory>
#include <vector>

struct TwoPartImpl : torch::nn::Module {
  TwoPartImpl() {
    backbone = register_module("backbone",
                               torch::nn::Sequential(torch::nn::Linear(6, 64), torch::nn::Tanh(),
                                                     torch::nn::Linear(64, 32), torch::nn::Tanh()));
    head = register_module("head", torch::nn::Linear(32, 2));
  }
  torch::Tensor forward(torch::Tensor x) { return head->forward(backbone->forward(x)); }

  torch::nn::Sequential backbone{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(TwoPart);

// Two regression targets from 6 features: a linear map plus a bump, noise 0.3.
class MultiTarget : public torch::data::datasets::Dataset<MultiTarget> {
 public:
  MultiTarget(const torch::Tensor& w, int64_t n) : x_(torch::randn({n, 6})) {
    auto bump = torch::exp(-x_.pow(2).sum(1, true) / 4);
    y_ = x_.matmul(w) + torch::cat({bump, -bump}, 1) + 0.3 * torch::randn({n, 2});
  }
  torch::data::Example<> get(size_t i) override { return {x_[i], y_[i]}; }
  torch::optional<size_t> size() const override { return x_.size(0); }

 private:
  torch::Tensor x_, y_;
};

int main() {
  torch::manual_seed(8);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  auto w = torch::randn({6, 2}) * 0.5;
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      MultiTarget(w, 1024).map(torch::data::transforms::Stack<>()), 32);
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      MultiTarget(w, 256).map(torch::data::transforms::Stack<>()), 128);

  TwoPart model;
  model->to(device);

  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(model->backbone->parameters(),
                      std::make_unique<torch::optim::AdamOptions>(1e-3));
  groups.emplace_back(model->head->parameters(), std::make_unique<torch::optim::AdamOptions>(1e-2));
  torch::optim::Adam optimizer(groups, torch::optim::AdamOptions(1e-3));

  std::cout << std::setprecision(4);
  for (int epoch = 1; epoch <= 20; ++epoch) {
    model->train();
    double sum_loss = 0;
    int steps = 0;
    for (auto& batch : *train_loader) {
      auto features = batch.data.to(device);
      auto targets = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(features), targets);
      loss.backward();
      optimizer.step();
      sum_loss += loss.item<double>();
      ++steps;
    }
    std::cout << "epoch " << epoch << " loss " << sum_loss / steps << "\n";
  }

  model->eval();
  torch::NoGradGuard no_grad;
  double test_loss = 0;
  int test_steps = 0;
  for (auto& batch : *test_loader) {
    auto out = model->forward(batch.data.to(device));
    test_loss += torch::mse_loss(out, batch.target.to(device)).item<double>();
    ++test_steps;
  }
  std::cout << "test loss " << test_loss / test_steps << std::endl;
}
