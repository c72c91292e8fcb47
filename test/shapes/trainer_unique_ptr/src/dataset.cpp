#include "dataset.h"

#include <cmath>

RingDataset::RingDataset(int64_t size) {
  labels_ = torch::randint(0, 3, {size}, torch::kLong);
  auto radius = labels_.to(torch::kFloat) + 1.0 + 0.2 * torch::randn({size});
  auto angle = torch::rand({size}) * 2 * M_PI;
  points_ = torch::stack({radius * torch::cos(angle), radius * torch::sin(angle)}, /*dim=*/1);

  auto mislabelled = torch::rand({size}) < 0.1;
  labels_ = torch::where(mislabelled, torch::randint(0, 3, {size}, torch::kLong), labels_);
}

torch::data::Example<> RingDataset::get(size_t index) {
  return {points_[index], labels_[index]};
}

torch::optional<size_t> RingDataset::size() const { return labels_.size(0); }
