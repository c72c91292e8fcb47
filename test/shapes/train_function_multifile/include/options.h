#pragma once

#include <torch/torch.h>

#include <cstdint>

struct Options {
  int epochs = 12;
  int64_t batch_size = 32;
  double lr = 0.05;
  double momentum = 0.9;
  int64_t n_train = 1536;
  int64_t n_test = 512;
  torch::Device device = torch::kCPU;
};
