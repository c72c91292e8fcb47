#include "tasks.h"

int main() {
  auto classifier = std::make_unique<ClassifierTrainer>(Net(), 0.1);
  classifier->fit(2);
  RegressorTrainer regressor(Net(), 0.05);
  regressor.fit(2);
  FineTuner tuner{Net()};
  tuner.fit(1);
  Unsealed unsealed(Net{});
  unsealed.step();
  TwoOptimizers two(Net{}, Net{});
  two.fit(1);
  torch::optim::SGD plain(Net()->parameters(), torch::optim::SGDOptions(0.1));
  WarmupLR warmup(plain, 10);
  warmup.step();
  return 0;
}
