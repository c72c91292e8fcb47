#pragma once

#include <torch/torch.h>

#include <utility>

constexpr int64_t kSensors = 12;
constexpr int64_t kFaults = 4;

// Synthetic sensor readings and fault labels drawn from torch's global
// generator (seed it first). `signatures` is [kFaults, kSensors].
std::pair<torch::Tensor, torch::Tensor> make_readings(const torch::Tensor& signatures, int64_t n,
                                                      double label_noise);
