#include <torch/torch.h>

#include "model/trainer.h"

int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  Trainer trainer(model, optimizer);
  for (int e = 0; e < 2; ++e) trainer.step(torch::ones({2}));
  return 0;
}
