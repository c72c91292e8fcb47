// Diagnostic-only rules (RuleKind::Diagnostic) warn and never fix: --fix
// leaves the file as it was, and the exported diagnostics carry no edits.
// RUN: rm -rf %t && mkdir -p %t && cp %s %t/input.cpp
// RUN: %clang_tidy --load=%tidy_plugin --checks='-*,fabric-hardcoded-device,fabric-cuda-runtime' \
// RUN:   --fix --export-fixes=%t/fixes.yaml %t/input.cpp -- %flags > %t/out.txt 2> %t/err.txt
// RUN: FileCheck %s --input-file=%t/out.txt
// RUN: diff %s %t/input.cpp
// RUN: FileCheck %s --check-prefix=YAML --input-file=%t/fixes.yaml
// RUN: FileCheck %s --check-prefix=NOFIX --input-file=%t/err.txt
#include <torch/torch.h>

extern "C" int cudaSetDevice(int device);

int main() {
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: warning: hard-coded device index: each rank trains on fabric.device(); decide whether this tensor belongs there [fabric-hardcoded-device]
  torch::Device gpu1("cuda:1");
  // CHECK: :[[@LINE+1]]:3: warning: raw CUDA device or stream management{{.*}}[fabric-cuda-runtime]
  cudaSetDevice(1);
  return 0;
}
// YAML: DiagnosticName: fabric-hardcoded-device
// YAML: Replacements: []
// YAML: DiagnosticName: fabric-cuda-runtime
// YAML: Replacements: []
// YAML-NOT: ReplacementText
// NOFIX-NOT: applied
