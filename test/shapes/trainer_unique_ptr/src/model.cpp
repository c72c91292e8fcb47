#include "model.h"

NetImpl::NetImpl(int64_t hidden, int64_t classes) {
  fc1_ = register_module("fc1", torch::nn::Linear(2, hidden));
  fc2_ = register_module("fc2", torch::nn::Linear(hidden, hidden));
  out_ = register_module("out", torch::nn::Linear(hidden, classes));
}

torch::Tensor NetImpl::forward(torch::Tensor x) {
  x = torch::relu(fc1_->forward(x));
  x = torch::relu(fc2_->forward(x));
  return out_->forward(x);
}
