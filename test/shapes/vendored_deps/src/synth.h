#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>

struct SynthSpec {
  int64_t size = 2048;
  int64_t features = 10;
  double noise = 0.3;
};

// Features ~ N(0, 1); the target is a smooth nonlinear function of the
// first four features plus Gaussian noise of std `spec.noise`.
std::pair<torch::Tensor, torch::Tensor> make_regression(const SynthSpec& spec);
