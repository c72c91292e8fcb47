#pragma once

#include <torch/torch.h>

#include <fstream>
#include <memory>

#include "config.h"
#include "dataset.h"
#include "model.h"

using Batch = torch::data::Example<>;

struct EvalResult {
  double loss;
  double accuracy;
};

class Trainer {
 public:
  explicit Trainer(const Config& config);

  void fit(int epochs);
  EvalResult evaluate();

 private:
  float train_step(const Batch& batch);

  Config config_;
  torch::Device device_;
  Net model_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  RingDataset train_set_;
  RingDataset test_set_;
  std::ofstream log_;
};
