#include "model/trainer.h"

Trainer::Trainer(Net model, torch::optim::Optimizer& optimizer) : model_(model), optimizer_(optimizer) {}

void Trainer::step(torch::Tensor x) {
  optimizer_.zero_grad();
  model_->forward(x).sum().backward();
  optimizer_.step();
}
