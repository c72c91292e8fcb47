#include "models.h"

Encoder::Encoder(int64_t in, int64_t hidden) {
  fc1 = register_module("fc1", torch::nn::Linear(in, hidden));
  fc2 = register_module("fc2", torch::nn::Linear(hidden, hidden));
}

torch::Tensor Encoder::forward(torch::Tensor x) {
  x = torch::relu(fc1->forward(x));
  return torch::relu(fc2->forward(x));
}

Head::Head(int64_t hidden, int64_t out_features) {
  out = register_module("out", torch::nn::Linear(hidden, out_features));
}

torch::Tensor Head::forward(torch::Tensor h) { return out->forward(h); }

SpiralNetImpl::SpiralNetImpl(int64_t in, int64_t hidden, int64_t classes) {
  fc1 = register_module("fc1", torch::nn::Linear(in, hidden));
  fc2 = register_module("fc2", torch::nn::Linear(hidden, hidden));
  fc3 = register_module("fc3", torch::nn::Linear(hidden, classes));
  drop = register_module("drop", torch::nn::Dropout(0.1));
}

torch::Tensor SpiralNetImpl::forward(torch::Tensor x) {
  x = torch::relu(fc1(x));
  x = drop(torch::relu(fc2(x)));
  return fc3(x);
}
