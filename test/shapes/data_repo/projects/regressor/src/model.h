#pragma once
#include <torch/torch.h>

// A small regression MLP with a residual hidden layer.
class RegressorImpl : public torch::nn::Module {
 public:
  RegressorImpl(int64_t in_dim, int64_t hidden);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::Linear input_{nullptr}, hidden_{nullptr}, output_{nullptr};
};
TORCH_MODULE(Regressor);
