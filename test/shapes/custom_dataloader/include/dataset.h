#pragma once
#include <cstddef>
#include <cstdint>

#include <torch/torch.h>

struct Sample {
  torch::Tensor features;  // [dim]
  int64_t label;
};

// What the DataLoader reads: anything indexable with a size.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual size_t size() const = 0;
  virtual Sample get(size_t index) const = 0;
};

// Gaussian blobs in `dim` dimensions, one per class; a fraction of the labels
// is replaced by a random class (annotation noise).
class BlobDataset : public Dataset {
 public:
  BlobDataset(const torch::Tensor& centers, int64_t size, double spread, double label_noise);

  size_t size() const override { return static_cast<size_t>(features_.size(0)); }
  Sample get(size_t index) const override;

 private:
  torch::Tensor features_;
  torch::Tensor labels_;
};
