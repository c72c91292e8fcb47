// RUN: %migrate %s -- %flags > %t.cpp
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags | diff -u %t.cpp -
#include <fabric/fabric.h>

// A Fabric the user declared but never launched gets its launch.
// CHECK: {{^  }}fabric::Fabric trainer_fabric(fabric::Options().devices(devices));
// CHECK-NEXT: {{^  }}trainer_fabric.launch();
// CHECK-NEXT: {{^  }}torch::manual_seed(0);
void train(int devices) {
  fabric::Fabric trainer_fabric(fabric::Options().devices(devices));
  torch::manual_seed(0);
}

// Already launched: nothing to do.
// CHECK: {{^  }}fabric::Fabric fabric;
// CHECK-NEXT: {{^  }}fabric.launch();
// CHECK-NEXT: {{^  }}torch::manual_seed(1);
void launched() {
  fabric::Fabric fabric;
  fabric.launch();
  torch::manual_seed(1);
}

int main() {
  train(2);
  launched();
  return 0;
}
