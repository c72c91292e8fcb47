#pragma once
// Our own loader: torch::data's is overkill for in-memory data and its
// templates made the build slow. Usage:
//
//   DataLoader loader(dataset, 32, /*shuffle=*/true);
//   Batch batch;
//   while (loader(batch)) { ... }   // one epoch
//   loader.reset();                 // next epoch (reshuffles)
#include <random>
#include <vector>

#include <torch/torch.h>

#include "dataset.h"

struct Batch {
  torch::Tensor x;  // [B, dim]
  torch::Tensor y;  // [B]
};

class DataLoader {
 public:
  DataLoader(Dataset& ds, int batch_size, bool shuffle, unsigned seed = 1234);

  // Fills the next batch; false once the epoch is over.
  bool operator()(Batch& batch);
  // Starts the next epoch.
  void reset();

  size_t num_batches() const { return (indices_.size() + batch_size_ - 1) / batch_size_; }
  size_t dataset_size() const { return ds_.size(); }

 private:
  Dataset& ds_;
  int batch_size_;
  bool shuffle_;
  std::vector<size_t> indices_;
  size_t cursor_;
  std::mt19937 rng_;
};
