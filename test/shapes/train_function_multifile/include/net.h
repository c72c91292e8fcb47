#pragma once

#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl(int64_t inputs, int64_t hidden, int64_t classes);
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(Net);
