#include "data.h"

#include <cmath>

PairDataset::PairDataset(torch::Tensor inputs, torch::Tensor targets)
    : inputs_(std::move(inputs)), targets_(std::move(targets)) {}

torch::data::Example<> PairDataset::get(size_t index) { return {inputs_[index], targets_[index]}; }

torch::optional<size_t> PairDataset::size() const { return inputs_.size(0); }

namespace data {

PairDataset make_regression(int64_t n) {
  auto x = torch::rand({n, 8}) * 4 - 2;
  auto y = torch::sin(1.5 * x.select(1, 0)) + 0.5 * x.select(1, 1) * x.select(1, 2) - 0.3 * x.select(1, 3).abs() +
           0.3 * torch::randn({n});
  return PairDataset(x, y.unsqueeze(1));
}

PairDataset make_spirals(int64_t n, const torch::Tensor& lift) {
  auto label = torch::randint(0, 2, {n}, torch::kLong);
  auto t = torch::rand({n}) * 3.0 + 0.5;
  auto angle = t * 1.6 + label.to(torch::kFloat) * M_PI;
  auto plane = torch::stack({t * torch::cos(angle), t * torch::sin(angle)}, 1) + 0.15 * torch::randn({n, 2});
  auto features = torch::tanh(plane.matmul(lift));
  auto flip = torch::rand({n}) < 0.1;
  label = torch::where(flip, 1 - label, label);
  return PairDataset(features, label);
}

}  // namespace data
