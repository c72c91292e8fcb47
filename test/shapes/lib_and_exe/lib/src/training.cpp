#include "tinyreg/training.h"

#include <iostream>

namespace tinyreg {

void fit(ResidualMLP& model, TabularSet train_set, const TrainSettings& settings,
         const torch::Device& device) {
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(settings.lr));
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(train_set).map(torch::data::transforms::Stack<>()), settings.batch_size);

  for (int epoch = 1; epoch <= settings.epochs; ++epoch) {
    model->train();
    torch::Tensor sum = torch::zeros({}, device);
    int64_t batches = 0;
    for (auto& batch : *loader) {
      auto x = batch.data.to(device);
      auto y = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model(x), y);
      loss.backward();
      optimizer.step();
      sum += loss.detach();
      ++batches;
    }
    std::cout << "epoch " << epoch << " loss " << (sum / batches).item<double>() << std::endl;
  }
}

double mean_squared_error(ResidualMLP& model, TabularSet rows, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  model->eval();
  const auto n = static_cast<double>(rows.size().value());
  auto loader = torch::data::make_data_loader(
      std::move(rows).map(torch::data::transforms::Stack<>()), 128);
  double sse = 0;
  for (auto& batch : *loader) {
    auto pred = model(batch.data.to(device));
    sse += torch::mse_loss(pred, batch.target.to(device), torch::Reduction::Sum).item<double>();
  }
  return sse / n;
}

}  // namespace tinyreg
