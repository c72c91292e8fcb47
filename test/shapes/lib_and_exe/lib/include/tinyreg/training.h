#pragma once

#include <torch/torch.h>

#include "tinyreg/model.h"

namespace tinyreg {

struct TrainSettings {
  int epochs = 15;
  int64_t batch_size = 64;
  double lr = 5e-3;
};

// Fits the model on the training rows; prints one line per epoch.
void fit(ResidualMLP& model, TabularSet train_set, const TrainSettings& settings,
         const torch::Device& device);

// Mean squared error on the given rows.
double mean_squared_error(ResidualMLP& model, TabularSet rows, const torch::Device& device);

}  // namespace tinyreg
