#include "base_trainer.h"

#include <iostream>

BaseTrainer::BaseTrainer(Net model, double lr) : model_(model) {
  optimizer_ = make_optimizer(lr);
}

std::unique_ptr<torch::optim::Optimizer> BaseTrainer::make_optimizer(double lr) {
  return std::make_unique<torch::optim::SGD>(model_->parameters(), torch::optim::SGDOptions(lr));
}

void BaseTrainer::fit(int epochs) {
  for (int epoch = 0; epoch < epochs; ++epoch) std::cout << "loss " << train_epoch() << std::endl;
}
