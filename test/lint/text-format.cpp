// Text format: `file:line:col: warning: <explanation> [<rule-id>]`, the
// source line, a caret under the column, a fix-it note per edit; exit 1.
// RUN: cd %S && %lint text-format.cpp -- %flags > %t.out 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.out --strict-whitespace --match-full-lines
#include <torch/torch.h>
int main() {
  torch::Tensor x = torch::randn({2});
	auto y = x.cuda();
  y.sum().backward();
}
// CHECK:text-format.cpp:6:1: warning: construct the Fabric at the top of main [fabric-insert]
// CHECK-NEXT:int main() {
// CHECK-NEXT:{{^}}^
// CHECK-NEXT:text-format.cpp:7:1: note: fix-it: {7:1-7:1}: "  fabric::Fabric fabric(fabric::Options().accelerator(\"auto\").devices(\"auto\")\n                            .strategy(\"ddp\").precision(\"32-true\"));\n"
// CHECK-NEXT:text-format.cpp:6:1: warning: launch the processes before anything touches a device [fabric-launch]
// CHECK-NEXT:int main() {
// CHECK-NEXT:{{^}}^
// CHECK-NEXT:text-format.cpp:7:1: note: fix-it: {7:1-7:1}: "  fabric.launch();\n"
// A tab before the column stays a tab, so the caret lines up.
// CHECK-NEXT:text-format.cpp:8:11: warning: move to the device this rank trains on [fabric-device-move]
// CHECK-NEXT:{{^}}	auto y = x.cuda();
// CHECK-NEXT:{{^}}	         ^
// CHECK-NEXT:text-format.cpp:8:11: note: fix-it: {8:11-8:19}: "x.to(fabric.device())"
// CHECK-NEXT:text-format.cpp:9:3: warning: backward through the Fabric so gradients are synchronised across ranks [fabric-backward]
// CHECK-NEXT:{{^}}  y.sum().backward();
// CHECK-NEXT:{{^}}  ^
// CHECK-NEXT:text-format.cpp:9:3: note: fix-it: {9:3-9:21}: "fabric.backward(y.sum())"
// CHECK-NEXT:4 findings.
// CHECK-EMPTY:
