// The benchmarks' model: `layers` square Linear layers with ReLU, as large
// as a test needs (width 1024, 6 layers: 6.3M parameters, 24 MiB).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

struct DeepMlpImpl : torch::nn::Module {
  DeepMlpImpl(int64_t width, int layers) {
    for (int i = 0; i < layers; ++i) {
      linears.push_back(register_module("linear" + std::to_string(i), torch::nn::Linear(width, width)));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& linear : linears) x = torch::relu(linear(x));
    return x;
  }
  std::vector<torch::nn::Linear> linears;
};
TORCH_MODULE(DeepMlp);
