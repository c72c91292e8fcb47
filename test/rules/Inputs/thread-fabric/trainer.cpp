#include "trainer.h"

Trainer::Trainer(Net model, torch::optim::Optimizer& optimizer)
    : model_(model), optimizer_(optimizer) {}

void Trainer::step(torch::Tensor x, torch::Tensor y) {
  optimizer_.zero_grad();
  auto loss = torch::mse_loss(model_->forward(x), y);
  loss.backward();
  optimizer_.step();
  std::cout << "loss " << loss.item<float>() << std::endl;
}
