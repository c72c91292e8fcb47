#include "model.h"

RegressorImpl::RegressorImpl(int64_t in_dim, int64_t hidden) {
  input_ = register_module("input", torch::nn::Linear(in_dim, hidden));
  hidden_ = register_module("hidden", torch::nn::Linear(hidden, hidden));
  output_ = register_module("output", torch::nn::Linear(hidden, 1));
}

torch::Tensor RegressorImpl::forward(torch::Tensor x) {
  auto h = torch::silu(input_->forward(x));
  h = h + torch::silu(hidden_->forward(h));
  return output_->forward(h);
}
