#include "trainer.h"

#include <cstdio>
#include <utility>

namespace surface {

Trainer::Trainer(std::shared_ptr<Net> model, std::shared_ptr<torch::optim::Optimizer> optimizer,
                 torch::Device device, Config config)
    : model_(std::move(model)),
      optimizer_(std::move(optimizer)),
      device_(device),
      config_(std::move(config)) {}

void Trainer::train(const SurfaceData& data) {
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      SurfaceData(data).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(config_.batch_size));

  for (int epoch = 1; epoch <= config_.epochs; ++epoch) {
    model_->train();
    double loss_sum = 0.0;
    long steps = 0;
    for (auto& batch : *loader) {
      auto xy = batch.data.to(device_);
      auto z = batch.target.to(device_);
      optimizer_->zero_grad();
      torch::Tensor loss = torch::mse_loss(model_->forward(xy), z);
      loss.backward();
      optimizer_->step();
      loss_sum += loss.item<double>();
      ++steps;
    }
    std::printf("epoch %d loss %.4f\n", epoch, loss_sum / steps);
  }
}

double Trainer::test(const SurfaceData& data) {
  torch::NoGradGuard no_grad;
  model_->eval();
  auto loader = torch::data::make_data_loader(
      SurfaceData(data).map(torch::data::transforms::Stack<>()), 64);
  double sum = 0.0;
  long count = 0;
  for (auto& batch : *loader) {
    auto pred = model_->forward(batch.data.to(device_));
    sum += torch::mse_loss(pred, batch.target.to(device_), torch::Reduction::Sum).item<double>();
    count += batch.data.size(0);
  }
  return sum / count;
}

}  // namespace surface
