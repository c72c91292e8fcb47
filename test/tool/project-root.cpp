// The project root -p gives when the build is not CMake's (a
// compile_commands.json by Bear, Meson or by hand): the common folder of the
// files it lists and the directories its commands run in; the files' own
// when that would be / (a command run from anywhere says nothing).
// RUN: rm -rf %t && mkdir -p %t/proj/src %t/proj/include %t/proj/builddir %t/elsewhere && cp %s %t/proj/src/train.cpp && echo 'inline int epochs() { return 1; }' > %t/proj/include/epochs.h
// RUN: %python -c "import json; print(json.dumps([{'directory': '%t/proj/builddir', 'file': '../src/train.cpp', 'arguments': ['c++', '-std=c++17', '-I../include', '-isystem', '%S/../stubs', '-c', '../src/train.cpp']}]))" > %t/proj/builddir/compile_commands.json
// RUN: %fabricize --all -p %t/proj/builddir -o %t/out 2> %t/err
// RUN: FileCheck %s --input-file=%t/err
// CHECK: fabricize: project root {{.*}}/proj (the common folder of the sources and directories compile_commands.json lists)
// RUN: test -f %t/out/src/train.cpp && test -f %t/out/include/epochs.h
//
// RUN: %python -c "import json; print(json.dumps([{'directory': '/', 'file': '%t/proj/src/train.cpp', 'arguments': ['c++', '-std=c++17', '-I%t/proj/include', '-isystem', '%S/../stubs', '-c', '%t/proj/src/train.cpp']}]))" > %t/elsewhere/compile_commands.json
// RUN: %fabricize --all -p %t/elsewhere -o %t/out-files 2> %t/err-files
// RUN: FileCheck %s --input-file=%t/err-files --check-prefix=FILES
// FILES: fabricize: project root {{.*}}/proj/src (the common folder of the sources compile_commands.json lists)
// RUN: test -f %t/out-files/train.cpp
#include <torch/torch.h>

#include "epochs.h"

int main() {
  torch::Tensor loss;
  if (epochs() > 0) loss.backward();
  return 0;
}
