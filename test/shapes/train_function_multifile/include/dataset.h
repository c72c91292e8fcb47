#pragma once

#include <torch/torch.h>

// Readings of 12 sensors; the label says which of 4 fault types is present.
class DataSet : public torch::data::datasets::Dataset<DataSet> {
 public:
  DataSet(torch::Tensor readings, torch::Tensor labels);

  torch::data::Example<> get(size_t index) override;
  torch::optional<size_t> size() const override;

  const torch::Tensor& readings() const { return readings_; }
  const torch::Tensor& labels() const { return labels_; }

 private:
  torch::Tensor readings_, labels_;
};
