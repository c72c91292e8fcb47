// The LibTorch PCH is built once per flag set, reused, rebuilt when a header
// it covers changed, and a broken one is never fatal: the tool parses without
// it and the result is the same.
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
// A header changed since the PCH was built: rebuilt, silently, same result.
// RUN: mkdir -p %t/stale && cp -r %S/../stubs %t/stale/stubs
// RUN: %fabricize --quiet --pch-cache %t/stale --stdout %s -- -std=c++17 -isystem %t/stale/stubs > %t/stale-first.cpp
// RUN: cp %t/stale/*.pch %t/stale-old.pch
// RUN: echo '// changed' >> %t/stale/stubs/torch/torch.h && touch -d '+1 minute' %t/stale/stubs/torch/torch.h
// RUN: %fabricize --quiet --pch-cache %t/stale --stdout %s -- -std=c++17 -isystem %t/stale/stubs > %t/stale-second.cpp 2> %t/stale.err
// RUN: count 0 < %t/stale.err
// RUN: diff %t/stale-first.cpp %t/stale-second.cpp
// RUN: not cmp -s %t/stale-old.pch %t/stale/*.pch
// RUN: %fabricize --quiet --pch-cache %t/stale --stdout %s -- -std=c++17 -isystem %t/stale/stubs 2>&1 > /dev/null | count 0
// A source that reaches LibTorch only through its own headers (one beside
// it, included with quotes, which includes one from a -I folder with angle
// brackets) gets the PCH, as a multi-file project's sources do; a source
// that never reaches it gets none.
// RUN: rm -rf %t/indirect && mkdir -p %t/indirect/cache %t/indirect/include/proj
// RUN: echo '#include <torch/torch.h>' > %t/indirect/include/proj/model.h
// RUN: echo '#include <proj/model.h>' > %t/indirect/helpers.h
// RUN: printf '#include "helpers.h"\nvoid f(torch::Tensor loss) { loss.backward(); }\n' > %t/indirect/train.cpp
// RUN: %fabricize --quiet --pch-cache %t/indirect/cache --stdout %t/indirect/train.cpp -- %flags -I %t/indirect/include | FileCheck %s --check-prefix=INDIRECT
// INDIRECT: fabric.backward(loss)
// RUN: ls %t/indirect/cache | FileCheck %s --check-prefix=BUILT
// RUN: rm -rf %t/indirect/cache && mkdir %t/indirect/cache
// RUN: printf '#include <vector>\nint g() { return 1; }\n' > %t/indirect/plain.cpp
// RUN: %fabricize --quiet --pch-cache %t/indirect/cache --stdout %t/indirect/plain.cpp -- %flags > /dev/null
// RUN: ls %t/indirect/cache | count 0
#include <torch/torch.h>

int main() {
  torch::Tensor loss;
  loss.backward();
  return 0;
}
