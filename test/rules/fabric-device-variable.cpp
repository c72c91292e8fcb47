// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: FileCheck %s --input-file=%t.err --check-prefix=MSG
// RUN: %migrate %t.cpp -- %flags > %t2.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t2.cpp
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

// CPU first, CUDA when there is one: the later assignment is the rank's
// device too, or every rank would train on cuda:0.
// CHECK: {{^  }}torch::Device chosen(fabric.device());
// CHECK-NEXT: {{^  }}if (torch::cuda::is_available()) chosen = fabric.device();
// CHECK-NEXT: {{^  }}if (torch::cuda::is_available()) chosen = fabric.device();
// CHECK-NEXT: {{^  }}chosen = torch::kCPU;
// CHECK-NEXT: {{^  }}auto z = torch::ones({2}, chosen);
void pick(fabric::Fabric& fabric) {
  torch::Device chosen(torch::kCPU);
  if (torch::cuda::is_available()) chosen = torch::Device(torch::kCUDA);
  if (torch::cuda::is_available()) chosen = torch::Device(torch::kCUDA, 0);
  chosen = torch::kCPU;
  auto z = torch::ones({2}, chosen);
}

// A training class (it holds the optimizer): its device member is the
// Fabric's device. The Fabric is threaded in first (fabric-thread-fabric).
// CHECK: {{^}}  Trainer(fabric::Fabric& fabric, Net model, torch::optim::Optimizer& optimizer)
// CHECK-NEXT: {{^}}      : fabric_(fabric), model_(model),
// CHECK-NEXT: {{^}}        optimizer_(optimizer),
// CHECK-NEXT: {{^}}        device_(fabric_.device()),
// CHECK-NEXT: {{^}}        fixed_(torch::kCUDA, 1) {}
class Trainer {
 public:
  Trainer(Net model, torch::optim::Optimizer& optimizer)
      : model_(model),
        optimizer_(optimizer),
        device_(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU),
        fixed_(torch::kCUDA, 1) {}
  // MSG: fabric-device-variable.cpp:[[@LINE-1]]:9: warning: hard-coded device index{{.*}}[fabric-hardcoded-device]

 private:
  Net model_;
  torch::optim::Optimizer& optimizer_;
  torch::Device device_;
  torch::Device fixed_;  // a fixed index is a person's decision (fabric-hardcoded-device)
};

// A Fabric already lives in this file, so main gets none and is not migrated.
// CHECK: {{^}}int main() {
// CHECK-NEXT: {{^  }}torch::Device device(torch::kCUDA);
int main() {
  torch::Device device(torch::kCUDA);
  only_moves();
  return 0;
}
