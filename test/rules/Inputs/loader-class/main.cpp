#include <torch/torch.h>

#include <cstdio>

#include "loader.h"

struct NetImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

double evaluate(Net& model, IndexLoader& loader) {
  torch::NoGradGuard no_grad;
  loader.reset();
  double total = 0;
  Batch batch;
  while (loader(batch)) total += torch::mse_loss(model->forward(batch.x), batch.y).item<double>() * batch.x.size(0);
  return total / static_cast<double>(loader.dataset_size());
}

int main() {
  Samples train_set, test_set;
  IndexLoader train_loader(train_set, 32, /*shuffle=*/true);
  IndexLoader test_loader(test_set, 128, /*shuffle=*/false);
  DataLoader::ImageFolder folder(train_set, 16, true, false);
  RingLoader ring(train_set, 16);
  StepLoader steps(train_set, 16, 10);
  Net model;
  torch::optim::Adam optimizer(model->parameters());
  for (int epoch = 0; epoch < 3; ++epoch) {
    train_loader.reset();
    Batch batch;
    while (train_loader(batch)) {
      auto loss = torch::mse_loss(model->forward(batch.x), batch.y);
      loss.backward();
      optimizer.step();
    }
    while (folder(batch)) {
      auto loss = torch::mse_loss(model->forward(batch.x), batch.y);
      loss.backward();
      optimizer.step();
    }
    ring.reset();
    for (int k = 0; k < 8; ++k) {
      Batch b = ring.next();
      auto loss = torch::mse_loss(model->forward(b.x), b.y);
      loss.backward();
      optimizer.step();
    }
    while (steps.next(batch)) {
      auto loss = torch::mse_loss(model->forward(batch.x), batch.y);
      loss.backward();
      optimizer.step();
    }
    // Counted passes over a loader that runs out (sharded in loader.cpp): the
    // loop would ask this rank's share for more batches than it holds.
    train_loader.reset();
    for (size_t s = 0; s < train_set.size() / 32; ++s) {
      train_loader(batch);
      auto loss = torch::mse_loss(model->forward(batch.x), batch.y);
      loss.backward();
      optimizer.step();
    }
    std::printf("test %f\n", evaluate(model, test_loader));
  }
  return 0;
}
