#include "data.h"

WaveData::WaveData(int64_t samples) {
  inputs_ = torch::rand({samples, kFeatures}) * 2 - 1;
  auto x = inputs_.unbind(1);
  targets_ = (torch::sin(2 * x[0]) + x[1] * x[2] - 0.5 * x[3] * x[3]).unsqueeze(1);
  targets_ += 0.3 * torch::randn({samples, 1});
}

torch::data::Example<> WaveData::get(size_t index) {
  const auto i = static_cast<int64_t>(index);
  return {inputs_[i], targets_[i]};
}

torch::optional<size_t> WaveData::size() const { return inputs_.size(0); }
