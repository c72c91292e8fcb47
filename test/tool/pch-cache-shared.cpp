// One LibTorch PCH serves every project that sees LibTorch the same way: it
// is keyed and built without the projects' own -I folders (Clang does not
// check a PCH's search paths, so a translation unit with more of them uses
// it), and the result is the same as without a PCH.
// RUN: rm -rf %t && mkdir -p %t/cache
// RUN: for p in a b; do mkdir -p %t/$p/src %t/$p/include/$p %t/$p/build && cp %s %t/$p/src/train.cpp && echo "inline int epochs() { return 2; }" > %t/$p/include/$p/config.h; done
// RUN: sed -i 's|CONFIG_HEADER|"a/config.h"|' %t/a/src/train.cpp && sed -i 's|CONFIG_HEADER|"b/config.h"|' %t/b/src/train.cpp
// RUN: for p in a b; do %python -c "import json; d='%t/$p'; print(json.dumps([{'directory': d+'/build', 'file': d+'/src/train.cpp', 'arguments': ['clang++', '-std=c++17', '-I', '../include', '-isystem', '%S/../stubs', '-c', d+'/src/train.cpp']}]))" > %t/$p/build/compile_commands.json; done
// RUN: %fabricize --verbose --pch-cache %t/cache -p %t/a/build --stdout %t/a/src/train.cpp > %t/a.pch.cpp 2> %t/a.err
// RUN: %fabricize --verbose --pch-cache %t/cache -p %t/b/build --stdout %t/b/src/train.cpp > %t/b.pch.cpp 2> %t/b.err
// RUN: ls %t/cache/*.pch | wc -l | FileCheck %s --check-prefix=ONE
// ONE: {{^}}1{{$}}
// Built by the first project, used as it is by the second (a rejected PCH
// would say so under --verbose, as a broken one does).
// RUN: FileCheck %s --input-file=%t/a.err --check-prefix=BUILT
// BUILT: building a LibTorch PCH
// RUN: not grep -e "building a LibTorch PCH" -e "not accepted" %t/b.err
// RUN: cp -r %t/cache %t/broken && for f in %t/broken/*.pch; do echo garbage > $f; done
// RUN: %fabricize --verbose --pch-cache %t/broken -p %t/b/build --stdout %t/b/src/train.cpp 2>&1 > /dev/null | FileCheck %s --check-prefix=REJECTED
// REJECTED: the PCH {{.*}} was not accepted
// RUN: %fabricize --no-pch -p %t/a/build --stdout %t/a/src/train.cpp > %t/a.plain.cpp
// RUN: %fabricize --no-pch -p %t/b/build --stdout %t/b/src/train.cpp > %t/b.plain.cpp
// RUN: diff %t/a.pch.cpp %t/a.plain.cpp
// RUN: diff %t/b.pch.cpp %t/b.plain.cpp
// RUN: FileCheck %s --input-file=%t/a.pch.cpp
// CHECK: fabric.backward(loss);
//
// What does change the preamble does change the key: a define, a standard,
// a LibTorch found elsewhere.
// RUN: %fabricize --pch-cache %t/cache --root %t/a --stdout %t/a/src/train.cpp -- -std=c++17 -I%t/a/include -isystem %S/../stubs > /dev/null
// RUN: ls %t/cache/*.pch | wc -l | FileCheck %s --check-prefix=ONE
// A migrated project names the runtime's headers, which fabricize adds to
// every command anyway: the same PCH.
// RUN: %fabricize --pch-cache %t/cache --root %t/a --stdout %t/a/src/train.cpp -- -std=c++17 -I%t/a/include -isystem %S/../stubs -isystem %S/../../runtime/include > /dev/null
// RUN: ls %t/cache/*.pch | wc -l | FileCheck %s --check-prefix=ONE
// RUN: %fabricize --pch-cache %t/cache --root %t/a --stdout %t/a/src/train.cpp -- -std=c++17 -I%t/a/include -isystem %S/../stubs -DNDEBUG > /dev/null
// RUN: %fabricize --pch-cache %t/cache --root %t/a --stdout %t/a/src/train.cpp -- -std=c++20 -I%t/a/include -isystem %S/../stubs > /dev/null
// RUN: mkdir -p %t/elsewhere && cp -r %S/../stubs %t/elsewhere/
// RUN: %fabricize --pch-cache %t/cache --root %t/a --stdout %t/a/src/train.cpp -- -std=c++17 -I%t/a/include -isystem %t/elsewhere/stubs > /dev/null
// RUN: ls %t/cache/*.pch | wc -l | FileCheck %s --check-prefix=FOUR
// FOUR: {{^}}4{{$}}
#include <torch/torch.h>

#include CONFIG_HEADER

int main() {
  torch::Tensor loss;
  if (epochs() > 0) loss.backward();
  return 0;
}
