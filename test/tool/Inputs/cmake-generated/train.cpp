#include <torch/torch.h>

#include "step.h"

int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  Trainer trainer(model, optimizer);
  trainer.step(torch::ones({2}));
  return 0;
}
