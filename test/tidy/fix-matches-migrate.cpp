// `clang-tidy --fix` with every fabric check writes what `fabricize` writes:
// the same edits, merged the same way (removed statements take their line,
// insertions at one place in catalogue order, the include after
// <torch/torch.h>).
// RUN: rm -rf %t && mkdir -p %t
// RUN: cp %S/Inputs/train.cpp %t/train.cpp
// RUN: %migrate %S/Inputs/train.cpp -- %flags > %t/migrated.cpp 2> /dev/null
// RUN: %clang_tidy --load=%tidy_plugin --checks='-*,fabric-*' --fix %t/train.cpp -- %flags > %t/tidy.out 2> %t/tidy.err
// RUN: FileCheck %s --check-prefix=APPLIED --input-file=%t/tidy.err
// RUN: diff -u %t/migrated.cpp %t/train.cpp
// Not two unchanged files: the migration happened.
// RUN: FileCheck %s --input-file=%t/train.cpp
// And fixing again finds nothing left to do.
// RUN: %clang_tidy --load=%tidy_plugin --checks='-*,fabric-*' --fix %t/train.cpp -- %flags > %t/again.out 2>&1
// RUN: diff -u %t/migrated.cpp %t/train.cpp
// Nothing is left to report: the loop draws its own batches, and each rank
// now draws its own (fabric-per-rank-random).
// RUN: FileCheck %s --check-prefix=AGAIN --allow-empty --input-file=%t/again.out
//
// APPLIED: clang-tidy applied {{[0-9]+}} of {{[0-9]+}} suggested fixes.
// APPLIED-NOT: conflict
// APPLIED-NOT: overlaps
//
// CHECK:      {{^}}#include <torch/torch.h>{{$}}
// CHECK-NEXT: {{^}}#include <fabric/fabric.h>{{$}}
// CHECK:      {{^}}int main() {{{$}}
// CHECK-NEXT: {{^}}  fabric::Fabric fabric(fabric::Options()
// CHECK-NEXT: {{^}}                            .strategy("ddp").precision("32-true"));{{$}}
// CHECK-NEXT: {{^}}  fabric.launch();{{$}}
// CHECK-NEXT: {{^}}  Net model;{{$}}
// CHECK-NEXT: {{^}}  torch::optim::SGD optimizer(
// CHECK-NEXT: {{^}}  fabric.setup(model, optimizer);{{$}}
// CHECK:      {{^}}  for (int epoch = 0; epoch < 3; ++epoch) {{{$}}
// CHECK-NEXT: {{^}}    auto per_rank_draws = fabric.per_rank_random();{{$}}
// CHECK:      {{^}}    torch::Tensor y = torch::randn({8, 1}).to(fabric.device());{{$}}
// CHECK:      {{^}}    fabric.backward(loss);{{$}}
// CHECK:      {{^}}    fabric.print() << "epoch "
// CHECK:      {{^}}  fabric.save("model.pt", model);{{$}}
//
// AGAIN-NOT: warning:
