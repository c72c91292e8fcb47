#pragma once
#include <torch/torch.h>

#include <memory>

struct NetImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

// The base keeps the model and makes the optimizer through its own factory;
// the overrides train.
class BaseTrainer {
 public:
  BaseTrainer(Net model, double lr);
  virtual ~BaseTrainer() = default;
  void fit(int epochs);

 protected:
  virtual double train_epoch() = 0;
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(double lr);

  Net model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

// A mixin that keeps no Fabric.
class Named {
 public:
  explicit Named(const char* name) : name_(name) {}

 protected:
  const char* name_;
};
