// Output modes: -o mirrors the tree and never writes into it; -i edits in
// place atomically; --emit-cmake writes a build; --report lists every edit.
// RUN: rm -rf %t && mkdir -p %t/project/src && cp %s %t/project/src/train.cpp
//
// -o inside the project root is refused, and nothing is written.
// RUN: %fabricize %t/project/src/train.cpp --root %t/project -o %t/project/out -- %flags 2> %t.err; test $? -eq 2
// RUN: FileCheck %s --input-file=%t.err --check-prefix=INSIDE
// RUN: test ! -e %t/project/out
// INSIDE: error: -o {{.*}}project/out is inside the project root
//
// -o mirrors the path under the root; the input is untouched.
// RUN: %fabricize %t/project/src/train.cpp --root %t/project -o %t/out --emit-cmake --report %t/report.json -- %flags
// RUN: diff %s %t/project/src/train.cpp
// RUN: FileCheck %s --input-file=%t/out/src/train.cpp --check-prefix=MIGRATED
// RUN: FileCheck %s --input-file=%t/out/CMakeLists.txt --check-prefix=CMAKE
// RUN: FileCheck %s --input-file=%t/report.json --check-prefix=REPORT
// MIGRATED: fabric.backward(loss);
// CMAKE: find_package(Fabric CONFIG REQUIRED)
// CMAKE: add_executable(train src/train.cpp)
// CMAKE: target_link_libraries(train PRIVATE Fabric::fabric)
// REPORT: "rule": "fabric-backward"
//
// -i replaces the file in place, keeping its permissions; a second run changes nothing.
// RUN: chmod 640 %t/project/src/train.cpp
// RUN: %fabricize -i %t/project/src/train.cpp -- %flags
// RUN: diff %t/out/src/train.cpp %t/project/src/train.cpp
// RUN: stat -c %%a %t/project/src/train.cpp | FileCheck %s --check-prefix=MODE
// MODE: 640
// RUN: %fabricize -i %t/project/src/train.cpp -- %flags 2>&1 | FileCheck %s --check-prefix=AGAIN
// AGAIN: train.cpp: 0 edits
// RUN: diff %t/out/src/train.cpp %t/project/src/train.cpp
// RUN: ls %t/project/src | FileCheck %s --check-prefix=NOTEMP
// NOTEMP-NOT: fabricize-
//
// Usage errors.
// RUN: %fabricize %t/missing.cpp -o %t/x > %t/missing.err 2>&1; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/missing.err --check-prefix=MISSING
// MISSING: error: {{.*}}missing.cpp: no such file
// RUN: %fabricize %t/project/src/train.cpp > %t/nomode.err 2>&1; test $? -eq 2
// RUN: FileCheck %s --input-file=%t/nomode.err --check-prefix=NOMODE
// NOMODE: error: choose exactly one output: -o <dir>, -i, --stdout or --diff
#include <torch/torch.h>

int main() {
  torch::Tensor loss;
  loss.backward();
  return 0;
}
