#pragma once

#include <torch/torch.h>

#include <vector>

#include "models.h"

struct ExperimentConfig {
  int64_t train_size = 2048;
  int64_t test_size = 512;
  int64_t batch_size = 32;
  int64_t hidden = 64;
  int epochs = 8;
  double lr = 5e-3;
};

// An encoder and a regression head, trained together through Trainer<>.
class Experiment {
 public:
  explicit Experiment(const ExperimentConfig& config);
  ~Experiment();
  Experiment(const Experiment&) = delete;
  Experiment& operator=(const Experiment&) = delete;

  // What Trainer<> needs from a model.
  std::vector<torch::Tensor> parameters() const;
  torch::Tensor forward(torch::Tensor x);
  void train(bool on = true);
  void eval() { train(false); }

  // Trains, then returns the test MSE.
  double run();

 private:
  ExperimentConfig config_;
  torch::Device device_;
  Encoder* encoder_ = nullptr;
  Head* head_ = nullptr;
};
