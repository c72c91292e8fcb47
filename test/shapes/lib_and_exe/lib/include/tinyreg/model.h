#pragma once

#include <torch/torch.h>

namespace tinyreg {

// A residual MLP for tabular regression.
class ResidualMLPImpl : public torch::nn::Module {
 public:
  ResidualMLPImpl(int64_t in_features, int64_t width);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::Linear stem_{nullptr}, block_{nullptr}, head_{nullptr};
};
TORCH_MODULE(ResidualMLP);

// y = x0^2 - x1 + 0.5 * x2 * x3 + 0.3 * noise, x in R^4
class TabularSet : public torch::data::datasets::Dataset<TabularSet> {
 public:
  explicit TabularSet(int64_t rows);
  torch::data::Example<> get(size_t row) override;
  torch::optional<size_t> size() const override;

 private:
  torch::Tensor features_, targets_;
};

}  // namespace tinyreg
