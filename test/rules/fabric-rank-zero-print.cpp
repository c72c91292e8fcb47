// RUN: %migrate %s -- %flags > %t.cpp
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags | diff -u %t.cpp -
#include <torch/torch.h>

// Outside a Fabric scope: untouched.
// CHECK: {{^}}void banner() { std::cout << "hello\n"; }
void banner() { std::cout << "hello\n"; }

// CHECK: {{^    }}fabric.print() << "epoch " << epoch << std::endl;
// CHECK-NEXT: {{^    }}fabric.printf("loss %.4f\n", 0.5);
// CHECK-NEXT: {{^    }}fabric.printf("step %d\n", epoch);
// Errors stay visible on every rank.
// CHECK-NEXT: {{^    }}std::cerr << "warning\n";
int main() {
  torch::manual_seed(0);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::cout << "epoch " << epoch << std::endl;
    std::printf("loss %.4f\n", 0.5);
    printf("step %d\n", epoch);
    std::cerr << "warning\n";
  }
  banner();
  return 0;
}
