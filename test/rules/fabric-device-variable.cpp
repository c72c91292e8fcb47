// RUN: %migrate %s -- %flags > %t.cpp
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags | diff -u %t.cpp -
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl();
};
TORCH_MODULE(Net);

// Only used for moves the other rules remove: the variable goes.
// CHECK: {{^}}void only_moves() {
// CHECK-NEXT: {{^  }}fabric::Fabric fabric;
// CHECK-NEXT: {{^  }}fabric.launch();
// CHECK-NEXT: {{^  }}Net model;
// CHECK-NEXT: {{^  }}torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
// CHECK-NEXT: {{^  }}fabric.setup(model, optimizer);
// CHECK-NEXT: {{^}}}
#include <fabric/fabric.h>
void only_moves() {
  fabric::Fabric fabric;
  fabric.launch();
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  Net model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
}

// Other uses keep the variable, now the Fabric's device.
// CHECK: {{^  }}torch::Device device(fabric.device());
// CHECK-NEXT: {{^  }}torch::Device second = fabric.device();
// CHECK-NEXT: {{^  }}auto x = torch::zeros({2}, torch::TensorOptions().device(device));
// CHECK-NEXT: {{^  }}auto y = torch::ones({2}, second);
void evaluate(fabric::Fabric& fabric) {
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  torch::Device second = torch::kCUDA;
  auto x = torch::zeros({2}, torch::TensorOptions().device(device));
  auto y = torch::ones({2}, second);
}

// A Fabric already lives in this file, so main gets none and is not migrated.
// CHECK: {{^}}int main() {
// CHECK-NEXT: {{^  }}torch::Device device(torch::kCUDA);
int main() {
  torch::Device device(torch::kCUDA);
  only_moves();
  return 0;
}
