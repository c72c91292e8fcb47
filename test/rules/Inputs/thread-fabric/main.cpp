#include <torch/torch.h>

#include "trainer.h"

int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  Trainer trainer(model, optimizer);
  trainer.step(torch::randn({4, 2}), torch::randn({4, 1}));
  return 0;
}
