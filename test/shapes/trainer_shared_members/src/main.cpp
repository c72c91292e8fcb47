#include <torch/torch.h>

#include <cstdio>

#include "config.h"
#include "factory.h"
#include "net.h"

int main() {
  torch::manual_seed(314);

  surface::Config config;
  surface::SurfaceData train_data(config.train_samples);
  surface::SurfaceData test_data(config.test_samples);

  surface::Trainer trainer = surface::make_trainer(config);
  trainer.train(train_data);
  std::printf("test loss %.4f\n", trainer.test(test_data));
  return 0;
}
