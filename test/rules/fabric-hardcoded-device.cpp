// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.err --check-prefix=MSG
// RUN: FileCheck %s --input-file=%t.cpp
#include <torch/torch.h>

// Reported, never edited.
// CHECK: {{^  }}torch::Device second("cuda:1");
// CHECK-NEXT: {{^  }}torch::Device third(torch::kCUDA, 2);
// MSG: fabric-hardcoded-device.cpp:[[@LINE+3]]:17: warning: hard-coded device index{{.*}}[fabric-hardcoded-device]
// MSG: fabric-hardcoded-device.cpp:[[@LINE+3]]:17: warning: hard-coded device index{{.*}}[fabric-hardcoded-device]
int main() {
  torch::Device second("cuda:1");
  torch::Device third(torch::kCUDA, 2);
  (void)second;
  (void)third;
  // Index 0 is "the GPU" of a single-device program: the rank's device.
  // CHECK: {{^  }}torch::Device gpu(fabric.device());
  // CHECK-NEXT: {{^  }}torch::Device first(fabric.device());
  // CHECK-NEXT: {{^  }}auto x = torch::ones({2}).to(fabric.device());
  torch::Device gpu("cuda:0");
  torch::Device first(torch::kCUDA, 0);
  auto x = torch::ones({2}).to(torch::Device("cuda:0"));
  (void)gpu;
  (void)first;
  return 0;
}
// MSG-NOT: warning
