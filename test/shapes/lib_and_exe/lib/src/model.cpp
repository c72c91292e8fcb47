#include "tinyreg/model.h"

namespace tinyreg {

ResidualMLPImpl::ResidualMLPImpl(int64_t in_features, int64_t width) {
  stem_ = register_module("stem", torch::nn::Linear(in_features, width));
  block_ = register_module("block", torch::nn::Linear(width, width));
  head_ = register_module("head", torch::nn::Linear(width, 1));
}

torch::Tensor ResidualMLPImpl::forward(torch::Tensor x) {
  auto h = torch::relu(stem_(x));
  h = h + torch::relu(block_(h));
  return head_(h);
}

TabularSet::TabularSet(int64_t rows) : features_(torch::randn({rows, 4})) {
  auto c = features_.unbind(1);
  targets_ = (c[0] * c[0] - c[1] + 0.5 * c[2] * c[3] + 0.3 * torch::randn({rows})).unsqueeze(1);
}

torch::data::Example<> TabularSet::get(size_t row) { return {features_[row], targets_[row]}; }

torch::optional<size_t> TabularSet::size() const { return features_.size(0); }

}  // namespace tinyreg
