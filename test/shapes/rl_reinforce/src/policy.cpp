#include "policy.h"

PolicyImpl::PolicyImpl(int64_t observation_size, int64_t hidden, int64_t num_actions) {
  fc1 = register_module("fc1", torch::nn::Linear(observation_size, hidden));
  fc2 = register_module("fc2", torch::nn::Linear(hidden, num_actions));
}

torch::Tensor PolicyImpl::forward(torch::Tensor x) {
  x = torch::relu(fc1->forward(x));
  return torch::softmax(fc2->forward(x), -1);
}
