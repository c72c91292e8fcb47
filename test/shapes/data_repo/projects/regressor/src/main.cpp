// Regression on a synthetic table with the repository's BatchStream loader.
#include <cstdio>

#include <torch/torch.h>

#include "datasets.h"
#include "loader.h"
#include "model.h"

namespace {

// Mean squared error over a whole data set.
double evaluate(Regressor& model, BatchStream& stream, torch::Device device) {
  torch::NoGradGuard no_grad;
  model->eval();
  stream.reset();
  double squared_error = 0.0;
  Batch batch;
  while (stream.next(batch)) {
    auto prediction = model->forward(batch.inputs.to(device));
    squared_error += (prediction - batch.targets.to(device)).pow(2).sum().item<double>();
  }
  return squared_error / static_cast<double>(stream.dataset_size());
}

}  // namespace

int main() {
  torch::manual_seed(17);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  const int64_t dim = 6;
  const int epochs = 10;
  datasets::SyntheticTable train_set(2048, dim, datasets::Task::Regression, /*sample_seed=*/11, /*problem_seed=*/7);
  datasets::SyntheticTable test_set(512, dim, datasets::Task::Regression, /*sample_seed=*/12, /*problem_seed=*/7);

  BatchStream train_stream(train_set, 32, /*shuffle=*/true);
  BatchStream test_stream(test_set, 256, /*shuffle=*/false);

  Regressor model(dim, 48);
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(3e-3));
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/4, /*gamma=*/0.5);

  for (int epoch = 1; epoch <= epochs; ++epoch) {
    model->train();
    train_stream.reset();
    double running = 0.0;
    size_t steps = 0;
    Batch batch;
    while (train_stream.next(batch)) {
      auto inputs = batch.inputs.to(device);
      auto targets = batch.targets.to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(inputs), targets);
      loss.backward();
      optimizer.step();
      running += loss.item<double>();
      ++steps;
    }
    scheduler.step();
    std::printf("epoch %d loss %.4f\n", epoch, running / steps);
  }

  std::printf("test loss %.4f\n", evaluate(model, test_stream, device));
  return 0;
}
