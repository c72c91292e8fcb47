// -j analyses translation units in parallel; the findings and their order do
// not depend on it. A count that is not positive is an error.
// RUN: rm -rf %t && mkdir -p %t/src && cp %s %t/src/a.cpp && cp %s %t/src/b.cpp && cp %s %t/src/c.cpp
// RUN: cd %t && %lint -j 1 src -- %flags > %t/one 2>&1; test $? -eq 1
// RUN: cd %t && %lint -j 3 src -- %flags > %t/three 2>&1; test $? -eq 1
// RUN: diff %t/one %t/three
// RUN: FileCheck %s --input-file=%t/three
// CHECK: src/a.cpp:[[@LINE+11]]:3: warning: {{.*}}[fabric-backward]
// CHECK: src/b.cpp:[[@LINE+10]]:3: warning: {{.*}}[fabric-backward]
// CHECK: src/c.cpp:[[@LINE+9]]:3: warning: {{.*}}[fabric-backward]
// RUN: cd %t && not %lint -j 0 src -- %flags 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: -j takes a positive number (1-9999), got '0'
// A number past unsigned long's range is the same clear error, not a crash.
// RUN: cd %t && not %lint -j 99999999999999999999999 src -- %flags 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: error: -j takes a positive number (1-9999), got '99999999999999999999999'
#include <torch/torch.h>
#include <fabric/fabric.h>
void step(fabric::Fabric& fabric, torch::Tensor loss) {
  loss.backward();
}
