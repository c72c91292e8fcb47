#pragma once

#include <torch/torch.h>

class NetImpl : public torch::nn::Module {
 public:
  NetImpl(int64_t hidden, int64_t classes);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr}, out_{nullptr};
};
TORCH_MODULE(Net);
