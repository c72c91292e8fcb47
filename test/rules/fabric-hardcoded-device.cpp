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
  return 0;
}
// MSG-NOT: warning
