#include "net.h"

NetImpl::NetImpl(int64_t inputs, int64_t hidden, int64_t classes)
    : fc1(register_module("fc1", torch::nn::Linear(inputs, hidden))),
      fc2(register_module("fc2", torch::nn::Linear(hidden, classes))),
      dropout(register_module("dropout", torch::nn::Dropout(0.1))) {}

torch::Tensor NetImpl::forward(torch::Tensor x) {
  return fc2->forward(dropout->forward(torch::relu(fc1->forward(x))));
}
