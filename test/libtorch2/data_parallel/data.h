// Synthetic regression data: y = sin(2 x0) + x1 * x2 - 0.5 x3^2 + noise.
#pragma once
#include <torch/torch.h>

constexpr int64_t kFeatures = 4;

class WaveData : public torch::data::datasets::Dataset<WaveData> {
 public:
  explicit WaveData(int64_t samples);

  torch::data::Example<> get(size_t index) override;
  torch::optional<size_t> size() const override;

 private:
  torch::Tensor inputs_, targets_;
};
