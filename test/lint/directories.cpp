// A directory is searched for .cpp/.cc/.cxx files; a file naming nothing
// the rules look for is not parsed (said with --verbose).
// RUN: rm -rf %t && mkdir -p %t/src/deep %t/.hidden
// RUN: cp %s %t/src/deep/train.cc
// RUN: printf 'int add(int a, int b) { return a + b; }\n' > %t/src/plain.cxx
// RUN: printf 'this is not C++ and would not parse\n' > %t/src/notes.txt
// RUN: cp %s %t/.hidden/skipped.cpp
// RUN: cd %t && %lint --verbose --select fabric-backward src -- %flags > %t/out 2> %t/err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t/err --check-prefix=VERBOSE
// VERBOSE-DAG: fabricize lint: src/plain.cxx: skipped (no rule's trigger token)
// VERBOSE-DAG: fabricize lint: src/deep/train.cc: analysing
// RUN: FileCheck %s --input-file=%t/out --implicit-check-not=warning:
// CHECK: src/deep/train.cc:[[@LINE+3]]:3: warning: {{.*}} [fabric-backward]
#include <torch/torch.h>
int main() {
  torch::randn({2}).sum().backward();
}
// Triggers are identifiers: any containing "cuda" or "allreduce" in any case
// counts (`cudaSetDevice`, `MPI_Allreduce`); plain arithmetic does not.
// RUN: printf 'void f() { cudaSetDevice(1); }\n' > %t/src/cuda.cc
// RUN: printf 'void g() { MPI_Allreduce(); }\n' > %t/src/mpi.cc
// RUN: cd %t && %lint --verbose --select fabric-backward src/cuda.cc src/mpi.cc src/plain.cxx -- %flags -fsyntax-only -Wno-everything -ferror-limit=0 2> %t/err2 > /dev/null; true
// RUN: FileCheck %s --input-file=%t/err2 --check-prefix=TRIGGERS
// TRIGGERS-DAG: src/plain.cxx: skipped
// TRIGGERS-DAG: src/cuda.cc: analysing
// TRIGGERS-DAG: src/mpi.cc: analysing
