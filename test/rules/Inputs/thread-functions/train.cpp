#include "train.h"

#include <iostream>

namespace {
// The backward pass lives in a helper train() calls.
torch::Tensor step(Net& model, torch::optim::Optimizer& optimizer) {
  optimizer.zero_grad();
  auto loss = model->forward(torch::randn({4, 2})).sum();
  loss.backward();
  optimizer.step();
  return loss;
}
}  // namespace

void train(Net& model, torch::optim::Optimizer& optimizer, int epochs) {
  for (int epoch = 0; epoch < epochs; ++epoch) {
    auto loss = step(model, optimizer);
    std::cout << "epoch " << epoch << " loss " << loss.item<float>() << std::endl;
  }
}

double evaluate(Net& model) {
  double loss = model->forward(torch::randn({4, 2})).sum().item<double>();
  std::cout << "eval loss " << loss << std::endl;
  return loss;
}

double probe(Net& model) {
  auto loss = model->forward(torch::randn({4, 2})).sum();
  loss.backward();
  return loss.item<double>();
}

Trainer::Trainer(Net model)
    : model_(model), optimizer_(std::make_unique<torch::optim::Adam>(model_->parameters())) {}

void Trainer::fit() {
  auto loss = model_->forward(torch::randn({4, 2})).sum();
  loss.backward();
  optimizer_->step();
}

std::unique_ptr<Trainer> make_trainer(Net model) { return std::make_unique<Trainer>(model); }
