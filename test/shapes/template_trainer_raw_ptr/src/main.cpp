// Two small jobs in one binary: a regression experiment (encoder + head,
// trained by the generic Trainer) and a spiral classifier.
#include <torch/torch.h>

#include <cstdio>
#include <iostream>

#include "classifier.h"
#include "data.h"
#include "experiment.h"

int main() {
  torch::manual_seed(42);

  ExperimentConfig config;
  double regression_mse = 0.0;
  {
    Experiment experiment(config);
    regression_mse = experiment.run();
  }
  std::printf("experiment test loss %.4f\n", regression_mse);

  auto lift = torch::randn({2, 8});
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      data::make_spirals(2048, lift).map(torch::data::transforms::Stack<>()), 32);
  auto test_loader = torch::data::make_data_loader(
      data::make_spirals(512, lift).map(torch::data::transforms::Stack<>()), 128);

  Classifier clf;
  clf.fit(*train_loader);
  const ClassifierMetrics m = clf.evaluate(*test_loader);
  std::printf("test loss %.4f acc %.4f\n", m.loss, m.accuracy);
  return 0;
}
