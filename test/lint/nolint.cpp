// NOLINT on the line and NOLINTNEXTLINE on the line before silence the
// rules they name (or all, bare), nothing else; BEGIN/END regions too.
// RUN: cd %S && %lint nolint.cpp -- %flags > %t.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.out --implicit-check-not=warning:
#include <torch/torch.h>
int main() {  // NOLINT(fabric-insert, fabric-launch)
  auto a = torch::randn({2});
  auto b = a.cuda();  // NOLINT(fabric-device-move)
  auto c = a.cuda();  // NOLINT(fabric-backward): names another rule
  // NOLINTNEXTLINE(fabric-device-move)
  auto d = a.cuda();
  // NOLINTNEXTLINE(fabric-backward)
  auto e = a.cuda();
  auto f = a.cuda();  // NOLINT
  // NOLINTNEXTLINE
  auto g = a.cuda();
  auto h = a.cuda();  // NOLINT(fabric-*)
  // NOLINTBEGIN(fabric-device-move)
  auto i = a.cuda();
  // NOLINTEND(fabric-device-move)
  auto j = a.cuda();  // NOLINTNEXTLINE(fabric-device-move) only covers the next line
  a.sum().backward();
}
// CHECK: nolint.cpp:9:12: warning: {{.*}} [fabric-device-move]
// CHECK: nolint.cpp:13:12: warning: {{.*}} [fabric-device-move]
// CHECK: nolint.cpp:21:12: warning: {{.*}} [fabric-device-move]
// CHECK: nolint.cpp:22:3: warning: {{.*}} [fabric-backward]
