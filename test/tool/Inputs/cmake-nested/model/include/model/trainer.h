#pragma once
#include <torch/torch.h>

#include "model/net.h"

class Trainer {
 public:
  Trainer(Net model, torch::optim::Optimizer& optimizer);
  void step(torch::Tensor x);

 private:
  Net model_;
  torch::optim::Optimizer& optimizer_;
};
