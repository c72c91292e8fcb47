#include <torch/torch.h>

#include <iostream>

#include "tinyreg/model.h"
#include "tinyreg/training.h"

int main() {
  torch::manual_seed(55);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);

  tinyreg::TabularSet train_rows(2048);
  tinyreg::TabularSet test_rows(512);

  tinyreg::ResidualMLP model(4, 64);
  tinyreg::TrainSettings settings;
  tinyreg::fit(model, train_rows, settings, device);

  std::cout << "test loss " << tinyreg::mean_squared_error(model, test_rows, device) << std::endl;
  return 0;
}
