#include "dataloader.h"

#include <algorithm>
#include <numeric>

DataLoader::DataLoader(Dataset& ds, int batch_size, bool shuffle, unsigned seed)
    : ds_(ds), batch_size_(batch_size), shuffle_(shuffle), indices_(ds.size()), cursor_(0), rng_(seed) {
  std::iota(indices_.begin(), indices_.end(), 0);
  reset();
}

void DataLoader::reset() {
  cursor_ = 0;
  if (shuffle_) {
    std::shuffle(indices_.begin(), indices_.end(), rng_);
  }
}

bool DataLoader::operator()(Batch& batch) {
  if (cursor_ >= indices_.size()) {
    return false;
  }
  const size_t end = std::min(cursor_ + batch_size_, indices_.size());
  std::vector<torch::Tensor> xs;
  std::vector<int64_t> ys;
  xs.reserve(end - cursor_);
  ys.reserve(end - cursor_);
  for (size_t i = cursor_; i < end; ++i) {
    Sample s = ds_.get(indices_[i]);
    xs.push_back(s.features);
    ys.push_back(s.label);
  }
  batch.x = torch::stack(xs);
  batch.y = torch::tensor(ys, torch::kLong);
  cursor_ = end;
  return true;
}
