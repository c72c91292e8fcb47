#include "dataset.h"

BlobDataset::BlobDataset(const torch::Tensor& centers, int64_t size, double spread, double label_noise) {
  const int64_t classes = centers.size(0);
  auto labels = torch::randint(classes, {size}, torch::kLong);
  features_ = centers.index_select(0, labels) + spread * torch::randn({size, centers.size(1)});
  auto flip = torch::rand({size}) < label_noise;
  labels_ = torch::where(flip, torch::randint(classes, {size}, torch::kLong), labels);
}

Sample BlobDataset::get(size_t index) const {
  return {features_[static_cast<int64_t>(index)], labels_[static_cast<int64_t>(index)].item<int64_t>()};
}
