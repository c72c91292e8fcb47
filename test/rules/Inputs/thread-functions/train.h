#pragma once
#include <torch/torch.h>

#include <functional>
#include <memory>

struct NetImpl : torch::nn::Module {
  NetImpl();
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

// Trains in place; declared here, defined in train.cpp, called from main.cpp.
void train(Net& model, torch::optim::Optimizer& optimizer, int epochs = 1);
// Reports this model's loss; prints it.
double evaluate(Net& model);
// Passed around as a callback: a parameter added to it would not reach it.
double probe(Net& model);

// A trainer holding its optimizer through a unique_ptr, made by a factory.
class Trainer {
 public:
  explicit Trainer(Net model);
  void fit();

 private:
  Net model_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
};
std::unique_ptr<Trainer> make_trainer(Net model);
