// Code written flush left (no indentation, a blank line above main's first
// statement) is migrated like any other: the Fabric goes above the first
// statement, not into the line before. (A line start was once searched for
// from the wrong character, which crashed on such input.)
// RUN: %migrate %s -- %flags > %t.cpp
// RUN: FileCheck %s --input-file=%t.cpp --strict-whitespace
// RUN: %migrate %t.cpp -- %flags | diff -u %t.cpp -
#include <torch/torch.h>

// A class holding an optimizer, its field flush left: the Fabric member goes
// on the line above it.
// CHECK: {{^}}struct Holder {{{$}}
// CHECK-NEXT: {{^}}fabric::Fabric& fabric;
// CHECK-NEXT: {{^}}torch::optim::SGD* optimizer;
struct Holder {
torch::optim::SGD* optimizer;
};

// CHECK: {{^}}int main() {{{$}}
// CHECK-EMPTY:
// CHECK-NEXT: {{^}}fabric::Fabric fabric(fabric::Options().accelerator("auto").devices("auto")
// CHECK-NEXT: {{^}}                          .strategy("ddp").precision("32-true"));
// CHECK-NEXT: {{^}}fabric.launch();
// CHECK-NEXT: {{^}}torch::Tensor x = torch::ones({1});
// CHECK-NEXT: {{^}}fabric.backward(x);
int main() {

torch::Tensor x = torch::ones({1});
x.backward();
return 0;
}
