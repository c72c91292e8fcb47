#pragma once
#include <torch/torch.h>

class MLPImpl : public torch::nn::Module {
 public:
  MLPImpl(int64_t in, int64_t hidden, int64_t classes, double dropout);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr}, fc3_{nullptr};
  torch::nn::Dropout drop_{nullptr};
};
TORCH_MODULE(MLP);
