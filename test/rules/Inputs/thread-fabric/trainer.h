#pragma once
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl();
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

// Holds the optimizer and runs the loop, in its own files.
class Trainer {
 public:
  Trainer(Net model, torch::optim::Optimizer& optimizer);
  void step(torch::Tensor x, torch::Tensor y);

 private:
  Net model_;
  torch::optim::Optimizer& optimizer_;
};
