// The LibTorch PCH is built once per flag set, reused, and a broken one is
// never fatal: the tool parses without it and the result is the same.
// RUN: rm -rf %t && mkdir -p %t/cache
// RUN: %fabricize --pch-cache %t/cache --stdout %s -- %flags > %t/first.cpp
// RUN: ls %t/cache | FileCheck %s --check-prefix=BUILT
// BUILT: torch-{{[0-9a-f]+}}.pch
// RUN: %fabricize --pch-cache %t/cache --stdout %s -- %flags > %t/second.cpp
// RUN: diff %t/first.cpp %t/second.cpp
// RUN: for f in %t/cache/*.pch; do echo garbage > $f; done
// RUN: %fabricize --pch-cache %t/cache --stdout %s -- %flags > %t/third.cpp 2> %t/third.err
// RUN: diff %t/first.cpp %t/third.cpp
// RUN: %fabricize --no-pch --stdout %s -- %flags > %t/plain.cpp
// RUN: diff %t/first.cpp %t/plain.cpp
// A different flag set gets its own PCH.
// RUN: %fabricize --pch-cache %t/cache --stdout %s -- %flags -DEXTRA=1 > /dev/null
// RUN: ls %t/cache/*.pch | wc -l | FileCheck %s --check-prefix=TWO
// TWO: 2
#include <torch/torch.h>

int main() {
  torch::Tensor loss;
  loss.backward();
  return 0;
}
