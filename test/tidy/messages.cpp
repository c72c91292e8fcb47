// The plugin's checks report what the rules match, each under its rule id,
// with the fix-it the rule's edits make.
// RUN: %clang_tidy --load=%tidy_plugin --checks='-*,fabric-*' %s -- %flags > %t.out 2> %t.err
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t.out
// The fix-its as clang-tidy exports them: the Fabric include lands after
// <torch/torch.h>, as `fabricize` puts it.
// RUN: %clang_tidy --load=%tidy_plugin --checks='-*,fabric-*' --export-fixes=%t.yaml %s -- %flags > /dev/null 2>&1
// RUN: FileCheck %s --check-prefix=YAML --input-file=%t.yaml
// Only the checks asked for run.
// RUN: %clang_tidy --load=%tidy_plugin --checks='-*,fabric-backward' %s -- %flags 2>&1 | FileCheck %s --check-prefix=ONE --implicit-check-not='warning:'
#include <torch/torch.h>

// No Fabric here, and none can be passed in (nothing calls it): reported,
// without a fix, whichever checks run.
// CHECK-MESSAGES: :[[@LINE+2]]:37: warning: not migrated (backward through the Fabric{{.*}}): nothing in the project calls `pretrain`{{.*}}[fabric-backward]
// ONE: :[[@LINE+1]]:37: warning: not migrated (backward through the Fabric{{.*}}): nothing in the project calls `pretrain`{{.*}}[fabric-backward]
void pretrain(torch::Tensor loss) { loss.backward(); }

// Two rules insert at the top of main: one fix-it carries both texts, in
// catalogue order, and the other warning says where its text went.
// CHECK-MESSAGES: :[[@LINE+3]]:1: warning: construct the Fabric at the top of main [fabric-insert]
// CHECK-MESSAGES: :[[@LINE+2]]:1: warning: launch the processes before anything touches a device [fabric-launch]
// CHECK-MESSAGES-NEXT: :[[@LINE+2]]:1: note: this insertion is part of the fix-it of [fabric-insert] here
int main() {
  // CHECK-MESSAGES: :[[@LINE+1]]:3: warning: device variable no longer used: the Fabric owns device placement [fabric-device-variable]
  torch::Device device(torch::kCUDA);
  // CHECK-MESSAGES: :[[@LINE+2]]:21: warning: move to the device this rank trains on [fabric-device-move]
  // CHECK-MESSAGES: {{^ +\| +}}torch::randn({2}).to(fabric.device()){{$}}
  torch::Tensor x = torch::randn({2}).cuda();
  torch::Tensor loss = x.sum();
  // CHECK-MESSAGES: :[[@LINE+3]]:3: warning: backward through the Fabric so gradients are synchronised across ranks [fabric-backward]
  // CHECK-MESSAGES: {{^ +\| +}}fabric.backward(loss){{$}}
  // ONE: :[[@LINE+1]]:3: warning: backward through the Fabric so gradients are synchronised across ranks [fabric-backward]
  loss.backward();
  return 0;
}

// YAML:      DiagnosticName: fabric-insert
// YAML:        ReplacementText: "#include <fabric/fabric.h>\n"
// YAML:        ReplacementText: "  fabric::Fabric fabric({{.*}});\n  fabric.launch();\n"
// YAML:      DiagnosticName: fabric-launch
// YAML-NEXT: DiagnosticMessage:
// YAML-NEXT:   Message: launch the processes before anything touches a device
// YAML-NEXT:   FilePath:
// YAML-NEXT:   FileOffset:
// YAML-NEXT:   Replacements: []
// YAML:      DiagnosticName: fabric-device-variable
// YAML:        ReplacementText: ''
// YAML:      DiagnosticName: fabric-device-move
// YAML:        ReplacementText: 'torch::randn({2}).to(fabric.device())'
// YAML:      DiagnosticName: fabric-backward
// YAML:        ReplacementText: 'fabric.backward(loss)'
