#include <cstdio>
#include <iostream>

#include <torch/torch.h>

#include "dataloader.h"
#include "dataset.h"
#include "model.h"

namespace {

struct Metrics {
  double loss;
  double acc;
};

Metrics evaluate(MLP& model, DataLoader& loader, torch::Device device) {
  torch::NoGradGuard no_grad;
  model->eval();
  loader.reset();
  double loss_sum = 0;
  int64_t correct = 0;
  Batch batch;
  while (loader(batch)) {
    auto x = batch.x.to(device);
    auto y = batch.y.to(device);
    auto logits = model->forward(x);
    loss_sum += torch::nn::functional::cross_entropy(
                    logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .item<double>();
    correct += logits.argmax(1).eq(y).sum().item<int64_t>();
  }
  const double n = static_cast<double>(loader.dataset_size());
  return {loss_sum / n, correct / n};
}

}  // namespace

int main() {
  torch::manual_seed(5);
  const int64_t dim = 8, classes = 4;
  const int epochs = 6;
  const int batch_size = 32;

  torch::Device device(torch::kCPU);
  if (torch::cuda::is_available()) {
    std::cout << "CUDA is available! Training on GPU." << std::endl;
    device = torch::Device(torch::kCUDA);
  }

  auto centers = torch::randn({classes, dim}) * 1.5;
  BlobDataset train_set(centers, 1024, 1.0, 0.1);
  BlobDataset test_set(centers, 512, 1.0, 0.1);
  DataLoader train_loader(train_set, batch_size, /*shuffle=*/true);
  DataLoader test_loader(test_set, 128, /*shuffle=*/false);

  MLP model(dim, 64, classes, 0.1);
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.02).momentum(0.9));

  for (int epoch = 1; epoch <= epochs; ++epoch) {
    model->train();
    train_loader.reset();
    double running = 0;
    int batches = 0;
    Batch batch;
    while (train_loader(batch)) {
      auto x = batch.x.to(device);
      auto y = batch.y.to(device);
      optimizer.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
      loss.backward();
      optimizer.step();
      running += loss.item<double>();
      ++batches;
    }
    const Metrics val = evaluate(model, test_loader, device);
    std::printf("epoch %d loss %.4f val_loss %.4f val_acc %.4f\n", epoch, running / batches, val.loss, val.acc);
  }

  const Metrics test = evaluate(model, test_loader, device);
  std::printf("test loss %.4f acc %.4f\n", test.loss, test.acc);
  return 0;
}
