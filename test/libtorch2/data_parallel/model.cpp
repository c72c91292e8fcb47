#include "model.h"

#include <torch/nn/parallel/data_parallel.h>

WaveNetImpl::WaveNetImpl(int64_t inputs, int64_t width) {
  input = register_module("input", torch::nn::Linear(inputs, width));
  hidden = register_module("hidden", torch::nn::Linear(width, width));
  output = register_module("output", torch::nn::Linear(width, 1));
}

torch::Tensor WaveNetImpl::forward(torch::Tensor x) {
  x = torch::relu(input(x));
  x = x + torch::relu(hidden(x));
  return output(x);
}

std::vector<torch::Device> cuda_devices() {
  std::vector<torch::Device> devices;
  for (int64_t i = 0; i < static_cast<int64_t>(torch::cuda::device_count()); ++i) {
    devices.emplace_back(torch::kCUDA, static_cast<torch::DeviceIndex>(i));
  }
  return devices;
}

torch::Tensor forward_on(WaveNet& model, const torch::Tensor& x, const std::vector<torch::Device>& gpus,
                         torch::Device output_device) {
  if (gpus.size() > 1) {
    return torch::nn::parallel::data_parallel(model, x, gpus, output_device);
  }
  return model->forward(x);
}
