// As in `fabricize`: code inside a macro expansion is reported, never
// edited; clang-tidy's own NOLINT comments silence a check by id.
// RUN: rm -rf %t && mkdir -p %t && cp %s %t/input.cpp
// RUN: %clang_tidy --load=%tidy_plugin --checks='-*,fabric-device-move,fabric-backward' --fix \
// RUN:   %t/input.cpp -- %flags > %t/out.txt 2>&1
// RUN: FileCheck %s --input-file=%t/out.txt --implicit-check-not='warning:'
// RUN: FileCheck %s --check-prefix=FIXED --input-file=%t/input.cpp
#include <fabric/fabric.h>

#define TO_GPU(t) (t).cuda()

void train(fabric::Fabric& fabric, torch::Tensor x) {
  // CHECK: :[[@LINE+1]]:21: warning: not migrated: the code is inside a macro expansion (move to the device this rank trains on); migrate it by hand [fabric-device-move]
  torch::Tensor y = TO_GPU(x);
  // CHECK: :[[@LINE+1]]:21: warning: move to the device this rank trains on [fabric-device-move]
  torch::Tensor z = x.cuda();
  torch::Tensor loss = (y + z).sum();
  loss.backward();  // NOLINT(fabric-backward)
  // CHECK: :[[@LINE+1]]:3: warning: backward through the Fabric {{.*}}[fabric-backward]
  loss.backward();
}
// FIXED: {{^}}  torch::Tensor y = TO_GPU(x);{{$}}
// FIXED: {{^}}  torch::Tensor z = x.to(fabric.device());{{$}}
// FIXED: {{^}}  loss.backward();  // NOLINT(fabric-backward){{$}}
// FIXED: {{^}}  fabric.backward(loss);{{$}}
