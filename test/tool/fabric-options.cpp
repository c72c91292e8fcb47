// The options the emitted Fabric asks for are checked at migration time by
// the runtime's own option parser (runtime/src/options.cpp): a name the
// runtime would refuse when the program runs is refused now, in the
// runtime's words, and nothing is written. Its aliases are accepted.
// RUN: rm -rf %t && mkdir -p %t
// RUN: not %fabricize --strategy fsdpp -o %t/out %s -- %flags 2> %t/strategy.err
// RUN: FileCheck %s --input-file=%t/strategy.err --check-prefix=STRATEGY
// RUN: test ! -e %t/out
// STRATEGY: fabricize: error: --strategy: fabric: invalid strategy 'fsdpp'; did you mean 'fsdp'?
// STRATEGY-SAME: Valid values: 'auto', 'ddp',{{.*}}'zero2'
// RUN: not %fabricize --precision bf17-mixed --stdout %s -- %flags 2>&1 | FileCheck %s --check-prefix=PRECISION
// PRECISION: fabricize: error: --precision: fabric: invalid precision 'bf17-mixed'; did you mean 'bf16-mixed'?
// RUN: not %fabricize --accelerator gpus --stdout %s -- %flags 2>&1 | FileCheck %s --check-prefix=ACCELERATOR
// ACCELERATOR: fabricize: error: --accelerator: fabric: invalid accelerator 'gpus'; did you mean 'gpu'?
// RUN: not %fabricize --devices 0,0 --stdout %s -- %flags 2>&1 | FileCheck %s --check-prefix=DEVICES
// DEVICES: fabricize: error: --devices: fabric: invalid devices '0,0': device 0 is listed twice
// RUN: not %fabricize --num-nodes 0 --stdout %s -- %flags 2>&1 | FileCheck %s --check-prefix=NODES
// NODES: fabricize: error: --num-nodes: takes a positive integer, got '0'
// A name Lightning knows that the runtime does not offer says so.
// RUN: not %fabricize --strategy dp --stdout %s -- %flags 2>&1 | FileCheck %s --check-prefix=PLANNED
// PLANNED: fabricize: error: --strategy: fabric: strategy 'dp' is not available in this build yet
// The help lists the runtime's own names: the ones the check above accepts.
// RUN: %fabricize --help | FileCheck %s --check-prefix=HELP
// HELP: --accelerator {{.*}}: auto, cpu, cuda, gpu (auto)
// HELP: --strategy {{.*}}strategy: auto, ddp,
// HELP: zero2,
// HELP: fsdp, zero3,
// HELP-NEXT: deepspeed_stage_3 (ddp)
// HELP-NEXT: --precision {{.*}}precision: 32-true, 32,
// HELP-NEXT: bf16-true (32-true)
// Aliases the runtime accepts are written as given.
// RUN: %fabricize --strategy deepspeed --precision bf16 --devices 0,2 --stdout %s -- %flags | FileCheck %s --check-prefix=ALIAS
// ALIAS: fabric::Options().accelerator("auto").devices({0, 2}).strategy("deepspeed").precision("bf16")
#include <torch/torch.h>

int main() {
  torch::Tensor loss = torch::randn({2}).sum();
  loss.backward();
  return 0;
}
