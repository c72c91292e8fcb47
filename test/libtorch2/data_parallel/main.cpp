// Fits a smooth function of four inputs with a small MLP, on the GPU when
// there is one and over all of them (data parallel) when there are several.
#include <torch/nn/parallel/data_parallel.h>
#include <torch/torch.h>

#include <iomanip>
#include <iostream>

#include "data.h"
#include "model.h"
#include "trainer.h"

int main() {
  torch::manual_seed(5);
  const torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  TrainConfig config;

  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      WaveData(2048).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(config.batch_size));
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      WaveData(512).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(128));

  WaveNet model(kFeatures, 32);
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(config.lr));
  Trainer trainer(model, optimizer, device);

  std::cout << std::fixed << std::setprecision(4);
  for (int epoch = 1; epoch <= config.epochs; ++epoch) {
    const double loss = trainer.train_epoch(*train_loader);
    std::cout << "epoch " << epoch << " loss " << loss << std::endl;
  }

  model->eval();
  torch::NoGradGuard no_grad;
  double total = 0;
  int64_t batches = 0;
  for (auto& batch : *test_loader) {
    auto x = batch.data.to(device);
    auto y = batch.target.to(device);
    torch::Tensor out;
    if (torch::cuda::device_count() > 1)
      out = torch::nn::parallel::data_parallel(model, x);
    else
      out = model->forward(x);
    total += torch::mse_loss(out, y).item<double>();
    ++batches;
  }
  std::cout << "test loss " << total / batches << std::endl;
  return 0;
}
