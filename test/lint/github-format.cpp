// GitHub workflow annotations, one line per finding; properties escape
// ':' and ','. Exit 1.
// RUN: cd %S && %lint --format github github-format.cpp -- %flags > %t.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.out --match-full-lines
// RUN: cd %S && %lint --format=github --select fabric-backward github-format.cpp -- %flags > %t.1.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.1.out --check-prefix=ONE --match-full-lines
// A ',' in the path is escaped, as workflow-command properties require.
// RUN: rm -rf %t.dir && mkdir -p '%t.dir/a,b' && cp %s '%t.dir/a,b/x.cpp'
// RUN: cd %t.dir && %lint --format github --select fabric-backward 'a,b/x.cpp' -- %flags > %t.2.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.2.out --check-prefix=ESCAPED --match-full-lines
#include <torch/torch.h>
int main() {
  torch::Tensor x = torch::randn({2});
  x.sum().backward();
}
// CHECK: ::warning file=github-format.cpp,line=12,col=1,title=fabric-insert::construct the Fabric at the top of main
// CHECK-NEXT: ::warning file=github-format.cpp,line=12,col=1,title=fabric-launch::launch the processes before anything touches a device
// CHECK-NEXT: ::warning file=github-format.cpp,line=14,col=3,title=fabric-backward::backward through the Fabric so gradients are synchronised across ranks
// CHECK-NOT: ::
// ONE: ::warning file=github-format.cpp,line=14,col=3,title=fabric-backward::backward through the Fabric so gradients are synchronised across ranks
// ONE-NOT: ::
// ESCAPED: ::warning file=a%2Cb/x.cpp,line={{[0-9]+}},col=3,title=fabric-backward::backward through the Fabric so gradients are synchronised across ranks
