#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

// An MLP with configurable hidden widths ("64,64" on the command line).
struct RidgeMLPImpl : torch::nn::Module {
  RidgeMLPImpl(int64_t in, const std::vector<int64_t>& hidden) {
    int64_t width = in;
    for (size_t i = 0; i < hidden.size(); ++i) {
      layers->push_back(torch::nn::Linear(width, hidden[i]));
      layers->push_back(torch::nn::Functional(torch::silu));
      width = hidden[i];
    }
    layers->push_back(torch::nn::Linear(width, 1));
    register_module("layers", layers);
  }

  torch::Tensor forward(torch::Tensor x) { return layers->forward(x); }

  torch::nn::Sequential layers;
};
TORCH_MODULE(RidgeMLP);
