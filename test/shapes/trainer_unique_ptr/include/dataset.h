#pragma once

#include <torch/torch.h>

// Points on three noisy concentric rings; the label is the ring (10% wrong).
class RingDataset : public torch::data::datasets::Dataset<RingDataset> {
 public:
  explicit RingDataset(int64_t size);

  torch::data::Example<> get(size_t index) override;
  torch::optional<size_t> size() const override;

 private:
  torch::Tensor points_;
  torch::Tensor labels_;
};
