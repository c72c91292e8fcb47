#include "model.h"

MLPImpl::MLPImpl(int64_t in, int64_t hidden, int64_t classes, double dropout) {
  fc1_ = register_module("fc1", torch::nn::Linear(in, hidden));
  fc2_ = register_module("fc2", torch::nn::Linear(hidden, hidden));
  fc3_ = register_module("fc3", torch::nn::Linear(hidden, classes));
  drop_ = register_module("drop", torch::nn::Dropout(dropout));
}

torch::Tensor MLPImpl::forward(torch::Tensor x) {
  x = drop_(torch::relu(fc1_(x)));
  x = drop_(torch::relu(fc2_(x)));
  return fc3_(x);
}
