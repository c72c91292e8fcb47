#pragma once
#include <torch/torch.h>

#include "util.h"

struct NetImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

class Trainer {
 public:
  Trainer(Net model, torch::optim::Optimizer& optimizer);
  void step(torch::Tensor x);

 private:
  Net model_;
  torch::optim::Optimizer& optimizer_;
};
