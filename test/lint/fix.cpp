// --fix applies the reported findings' fix-its in place and gives the same
// code as `fabricize --stdout`; fixed findings leave exit 0, and a second
// lint is clean.
// RUN: rm -rf %t && mkdir -p %t && cp %s %t/train.cpp
// RUN: %migrate %s -- %flags > %t/expected.cpp
// RUN: %lint --fix %t/train.cpp -- %flags > %t/fix.out; test $? -eq 0
// RUN: FileCheck %s --input-file=%t/fix.out --check-prefix=FIXED
// FIXED: warning: {{.*}} [fabric-insert] (fixed)
// RUN: diff -u %t/expected.cpp %t/train.cpp
// RUN: %lint %t/train.cpp -- %flags; test $? -eq 0
// RUN: ls %t | FileCheck %s --check-prefix=NOTEMP
// NOTEMP-NOT: fabricize-
//
// A suppressed finding is not fixed; the rest are.
// RUN: cp %s %t/partial.cpp
// RUN: %lint --fix --ignore fabric-backward %t/partial.cpp -- %flags; test $? -eq 0
// RUN: FileCheck %s --input-file=%t/partial.cpp --check-prefix=PARTIAL
// PARTIAL: fabric.launch();
// PARTIAL: auto y = x.to(fabric.device());
// PARTIAL: loss.backward();
// A report-only finding cannot be fixed: exit 1 after --fix.
// RUN: cp %S/Inputs/report-only.cpp %t/report-only.cpp
// RUN: %lint --fix %t/report-only.cpp -- %flags > %t/ro.out; test $? -eq 1
#include <torch/torch.h>
int main() {
  torch::Tensor x = torch::randn({2});
  auto y = x.cuda();
  auto loss = y.sum();
  loss.backward();
}
