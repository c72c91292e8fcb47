#include "tasks.h"

ClassifierTrainer::ClassifierTrainer(Net model, double lr) : BaseTrainer(model, lr), Named("classify") {}

double ClassifierTrainer::train_epoch() {
  torch::Tensor loss = model_->forward(torch::ones({2})).sum();
  loss.backward();
  optimizer_->step();
  return loss.item<double>();
}

double RegressorTrainer::train_epoch() {
  torch::Tensor loss = model_->forward(torch::ones({2})).pow(2).sum();
  loss.backward();
  optimizer_->step();
  return loss.item<double>();
}

double TwoOptimizers::train_epoch() {
  torch::Tensor loss = head_->forward(model_->forward(torch::ones({2}))).sum();
  loss.backward();
  optimizer_->step();
  head_optimizer_.step();
  return loss.item<double>();
}
