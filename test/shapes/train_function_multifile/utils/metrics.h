#pragma once

#include <torch/torch.h>

#include <cstdint>

// Fraction of rows whose arg-max equals the target.
double accuracy(const torch::Tensor& logits, const torch::Tensor& targets);

// Sample-weighted running average.
class RunningMean {
 public:
  void update(double value, int64_t weight = 1);
  double mean() const;

 private:
  double sum_ = 0;
  int64_t count_ = 0;
};
