// RUN: %migrate %s -- %flags > %t.cpp
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags | diff -u %t.cpp -
// Options on the command line reach the emitted Fabric.
// RUN: %migrate --accelerator cpu --devices 2 --num-nodes 1 %s -- %flags | FileCheck %s --check-prefix=OPTS
// RUN: %migrate --devices 0,2 %s -- %flags | FileCheck %s --check-prefix=LIST
// A value that is not a plain name never reaches the emitted source.
// RUN: %migrate --devices '2");system("x' %s -- %flags > %t.bad 2> %t.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t.err --check-prefix=BAD
// RUN: test ! -s %t.bad
// BAD: error: --devices: '2");system("x' is not a plain name

// The include goes right after LibTorch's.
// CHECK: {{^}}#include <torch/torch.h>
// CHECK-NEXT: {{^}}#include <fabric/fabric.h>
#include <torch/torch.h>

#include <string>

// A helper without a Fabric stays as it is.
// CHECK: {{^}}int helper() { return 1; }
int helper() { return 1; }

// The Fabric is constructed and launched at the top of main, after the
// argument parsing main starts with (it reads argv and touches nothing of
// LibTorch), above the comment that belongs to the first statement.
// CHECK: {{^}}int main(int argc, char** argv) {
// CHECK-NEXT: {{^  }}int epochs = 3;
// CHECK-NEXT: {{^  }}for (int i = 1; i < argc; ++i) {
// CHECK-NEXT: {{^    }}if (std::string(argv[i]) == "--epochs") epochs = std::stoi(argv[++i]);
// CHECK-NEXT: {{^  }}}
// CHECK-NEXT: {{^  }}fabric::Fabric fabric(fabric::Options().accelerator("auto").devices("auto"){{$}}
// CHECK-NEXT: {{^                            }}.strategy("ddp").precision("32-true"));
// CHECK-NEXT: {{^  }}fabric.launch();
// CHECK-NEXT: {{^  }}// Seed first.
// CHECK-NEXT: {{^  }}torch::manual_seed(0);
// OPTS: {{^  }}fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(2).num_nodes(1){{$}}
// OPTS-NEXT: {{^                            }}.strategy("ddp").precision("32-true"));
// LIST: {{^  }}fabric::Fabric fabric(fabric::Options().accelerator("auto").devices("0,2"){{$}}
int main(int argc, char** argv) {
  int epochs = 3;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--epochs") epochs = std::stoi(argv[++i]);
  }
  // Seed first.
  torch::manual_seed(0);
  return helper() + epochs;
}

// When main touches LibTorch before (or while) it reads its arguments, the
// Fabric goes first.
// RUN: %migrate %S/Inputs/insert-after-devices/main.cpp -- %flags | FileCheck %s --check-prefix=FIRST
// FIRST: {{^}}int main(int argc, char** argv) {
// FIRST-NEXT: {{^  }}fabric::Fabric fabric(
