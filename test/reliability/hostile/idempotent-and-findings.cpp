// Migrating migrated code changes nothing; findings a person must read give
// exit 1 with the output written; the documented exit codes hold in every
// output mode.
// RUN: rm -rf %t && mkdir -p %t/in
// RUN: %migrate %S/Inputs/train.cpp -- %flags > %t/once.cpp
// RUN: %fabricize --stdout %t/once.cpp -- %flags > %t/twice.cpp 2> %t/twice.err
// RUN: cmp %t/once.cpp %t/twice.cpp
// RUN: FileCheck %s --input-file=%t/twice.err --check-prefix=ZERO
// RUN: cp %t/once.cpp %t/inplace.cpp && %fabricize -i %t/inplace.cpp -- %flags
// RUN: cmp %t/once.cpp %t/inplace.cpp
// RUN: %fabricize --diff %t/once.cpp -- %flags | count 0
//
// A finding (cudaSetDevice): exit 1, the file still migrated, the call kept.
// RUN: sed 's/^int main() {$/int main() {\n  cudaSetDevice(1);/' %S/Inputs/train.cpp > %t/in/finding.cpp
// RUN: %fabricize %t/in/finding.cpp -o %t/out -- %flags -include %S/Inputs/cuda_runtime_stub.h 2> %t/finding.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t/finding.err --check-prefix=FINDING
// RUN: FileCheck %s --input-file=%t/out/finding.cpp --check-prefix=KEPT
// RUN: %fabricize --stdout %t/in/finding.cpp -- %flags -include %S/Inputs/cuda_runtime_stub.h > /dev/null 2>&1; test $? -eq 1
// RUN: %fabricize --diff %t/in/finding.cpp -- %flags -include %S/Inputs/cuda_runtime_stub.h > /dev/null 2>&1; test $? -eq 1
//
// ZERO: once.cpp: 0 edits
// FINDING: finding.cpp:{{[0-9]+}}:{{[0-9]+}}: warning: {{.*}}[fabric-cuda-runtime]
// KEPT: cudaSetDevice(1);
// KEPT: fabric.backward(loss);
