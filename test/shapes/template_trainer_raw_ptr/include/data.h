#pragma once

#include <torch/torch.h>

#include <cstdint>

// A data set over two tensors (inputs, targets) of the same length.
class PairDataset : public torch::data::datasets::Dataset<PairDataset> {
 public:
  PairDataset(torch::Tensor inputs, torch::Tensor targets);
  torch::data::Example<> get(size_t index) override;
  torch::optional<size_t> size() const override;

 private:
  torch::Tensor inputs_;
  torch::Tensor targets_;
};

namespace data {

// y = f(x) + N(0, 0.3^2), x in R^8.
PairDataset make_regression(int64_t n);

// Two interleaved spirals in the plane, lifted to R^8 by a fixed random map;
// 10% of the labels flipped.
PairDataset make_spirals(int64_t n, const torch::Tensor& lift);

}  // namespace data
