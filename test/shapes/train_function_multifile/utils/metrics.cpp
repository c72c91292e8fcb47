#include "metrics.h"

double accuracy(const torch::Tensor& logits, const torch::Tensor& targets) {
  auto hits = logits.argmax(1).eq(targets).sum().item<int64_t>();
  return static_cast<double>(hits) / static_cast<double>(targets.size(0));
}

void RunningMean::update(double value, int64_t weight) {
  sum_ += value * weight;
  count_ += weight;
}

double RunningMean::mean() const { return count_ == 0 ? 0.0 : sum_ / count_; }
