#pragma once
#include <torch/torch.h>

// Action probabilities from an observation.
struct PolicyImpl : torch::nn::Module {
  PolicyImpl(int64_t observation_size, int64_t hidden, int64_t num_actions);
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Policy);
