#include <torch/torch.h>

#include "train.h"

int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  train(model, optimizer, 2);
  evaluate(model);
  std::function<double(Net&)> callback = probe;
  callback(model);
  auto trainer = make_trainer(model);
  trainer->fit();
  return 0;
}
