#pragma once
#include <torch/torch.h>

#include <vector>

// Two hidden layers with a residual connection around the second.
struct WaveNetImpl : torch::nn::Module {
  WaveNetImpl(int64_t inputs, int64_t hidden);
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Linear input{nullptr}, hidden{nullptr}, output{nullptr};
};
TORCH_MODULE(WaveNet);

// The CUDA devices of this machine (none on a CPU-only one).
std::vector<torch::Device> cuda_devices();

// model(x), split over `gpus` when there are several (the outputs gathered
// on `output_device`).
torch::Tensor forward_on(WaveNet& model, const torch::Tensor& x, const std::vector<torch::Device>& gpus,
                         torch::Device output_device);
