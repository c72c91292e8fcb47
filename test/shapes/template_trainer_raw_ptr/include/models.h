#pragma once

#include <torch/torch.h>

// Plain modules, owned by whoever news them.
struct Encoder : torch::nn::Module {
  Encoder(int64_t in, int64_t hidden);
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

struct Head : torch::nn::Module {
  Head(int64_t hidden, int64_t out);
  torch::Tensor forward(torch::Tensor h);

  torch::nn::Linear out{nullptr};
};

// The classifier's network, a holder.
struct SpiralNetImpl : torch::nn::Module {
  SpiralNetImpl(int64_t in, int64_t hidden, int64_t classes);
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
  torch::nn::Dropout drop{nullptr};
};
TORCH_MODULE(SpiralNet);
