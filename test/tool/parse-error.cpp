// A file that does not compile: exit 2, a message naming it, nothing written.
// RUN: rm -rf %t.out
// RUN: %fabricize %s -o %t.out -- %flags > %t.stdout 2> %t.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t.err
// RUN: test ! -e %t.out
// CHECK: parse-error.cpp:[[@LINE+3]]:{{[0-9]+}}: error:
// CHECK: fabricize: error: {{.*}}parse-error.cpp: does not compile (see the errors above); nothing was written
#include <torch/torch.h>
int main() { torch::Tensor x = undeclared_thing(); x.backward(); }
