// FabricOptions are check options: fabric-insert.Strategy etc. for one
// check, or the global Strategy etc. for every fabric check. With the same
// choices, --fix writes what `fabricize --strategy ... --devices ...` writes.
// RUN: rm -rf %t && mkdir -p %t && cp %s %t/local.cpp && cp %s %t/global.cpp
// RUN: %clang_tidy --load=%tidy_plugin --checks='-*,fabric-*' --fix \
// RUN:   -config='{CheckOptions: {fabric-insert.Strategy: auto, fabric-insert.Devices: 4, fabric-insert.Precision: bf16-mixed, fabric-insert.NumNodes: 2}}' \
// RUN:   %t/local.cpp -- %flags > %t/local.out 2>&1
// RUN: %migrate --strategy auto --devices 4 --precision bf16-mixed --num-nodes 2 %s -- %flags > %t/local.migrated.cpp
// RUN: diff -u %t/local.migrated.cpp %t/local.cpp
// RUN: FileCheck %s --check-prefix=LOCAL --input-file=%t/local.cpp
// RUN: %clang_tidy --load=%tidy_plugin --checks='-*,fabric-*' --fix \
// RUN:   -config='{CheckOptions: {Accelerator: cpu, Strategy: single_device}}' %t/global.cpp -- %flags > %t/global.out 2>&1
// RUN: FileCheck %s --check-prefix=GLOBAL --input-file=%t/global.cpp
// --dump-config lists them with their values.
// RUN: %clang_tidy --load=%tidy_plugin --checks='-*,fabric-*' -config='{CheckOptions: {fabric-insert.Strategy: auto}}' \
// RUN:   --dump-config %s -- %flags | FileCheck %s --check-prefix=DUMP
// A value that is not a plain name would be pasted into code: refused, with
// the check switched off rather than run with another value.
// RUN: not %clang_tidy --load=%tidy_plugin --checks='-*,fabric-*' -config='{CheckOptions: {fabric-insert.Strategy: "ddp\")"}}' \
// RUN:   %s -- %flags > %t/bad.out 2>&1
// RUN: FileCheck %s --check-prefix=BAD --input-file=%t/bad.out
// RUN: not %clang_tidy --load=%tidy_plugin --checks='-*,fabric-*' -config='{CheckOptions: {fabric-insert.NumNodes: two}}' \
// RUN:   %s -- %flags > %t/bad-nodes.out 2>&1
// RUN: FileCheck %s --check-prefix=BAD-NODES --input-file=%t/bad-nodes.out
// A name the runtime would refuse when the program runs, in its words.
// RUN: not %clang_tidy --load=%tidy_plugin --checks='-*,fabric-*' -config='{CheckOptions: {fabric-insert.Strategy: fsdpp}}' \
// RUN:   %s -- %flags > %t/typo.out 2>&1
// RUN: FileCheck %s --check-prefix=TYPO --input-file=%t/typo.out
#include <torch/torch.h>

int main() {
  torch::Tensor loss = torch::randn({2}).sum();
  loss.backward();
  return 0;
}
// LOCAL: fabric::Fabric fabric(fabric::Options().accelerator("auto").devices(4).num_nodes(2)
// LOCAL-NEXT: .strategy("auto").precision("bf16-mixed"));
// LOCAL: fabric.backward(loss);
// GLOBAL: fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices("auto").strategy("single_device").precision("32-true"));
//
// DUMP-DAG: fabric-insert.Strategy: auto
// DUMP-DAG: fabric-insert.Accelerator: auto
// DUMP-DAG: fabric-insert.Devices: auto
// DUMP-DAG: fabric-insert.Precision: 32-true
// DUMP-DAG: fabric-backward.Strategy: ddp
//
// BAD: error: invalid value 'ddp")' for option 'fabric-insert.Strategy': use letters, digits, '-', '_', ',' or '.'; check 'fabric-insert' is disabled [clang-tidy-config]
// BAD-NOT: [fabric-insert]
// BAD: warning: backward through the Fabric {{.*}}[fabric-backward]
// BAD-NOT: [fabric-insert]
// TYPO: error: invalid value 'fsdpp' for option 'fabric-insert.Strategy': fabric: invalid strategy 'fsdpp'; did you mean 'fsdp'?{{.*}}Valid values: 'auto', 'ddp'{{.*}}; check 'fabric-insert' is disabled [clang-tidy-config]
// TYPO-NOT: [fabric-insert]
// BAD-NODES: error: invalid value 'two' for option 'fabric-insert.NumNodes': a positive integer, or empty; check 'fabric-insert' is disabled [clang-tidy-config]
