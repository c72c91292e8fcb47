// Compile commands: -p build/ lints every source the database lists, or the
// given files with its flags (a file it does not list gets a neighbour's
// command, as in clangd); without -p or `--`, a compile_commands.json above
// the file is found.
// RUN: rm -rf %t && mkdir -p %t/src %t/build && cp %s %t/src/train.cpp
// RUN: printf '#include <torch/torch.h>\nint main() { torch::randn({2}).sum().backward(); }\n' > %t/src/unlisted.cpp
// RUN: printf '[{"directory": "%t/src", "file": "train.cpp", "arguments": ["clang++", "-std=c++17", "-isystem", "%S/../stubs", "-c", "train.cpp"]}]' > %t/build/compile_commands.json
// RUN: cd %t && %lint -p build > %t/all.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t/all.out --implicit-check-not=unlisted
// CHECK: src/train.cpp:[[@LINE+11]]:3: warning: {{.*}} [fabric-backward]
// RUN: cd %t && %lint -p build src/unlisted.cpp src/train.cpp > %t/unlisted.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t/unlisted.out --check-prefixes=CHECK,UNLISTED
// UNLISTED: src/unlisted.cpp:2:14: warning: {{.*}} [fabric-backward]
// Found above the file: the stubs are only on the database's include path.
// RUN: cp %t/build/compile_commands.json %t/compile_commands.json
// RUN: cd %t && %lint src/train.cpp > %t/detected.out; test $? -eq 1
// RUN: FileCheck %s --input-file=%t/detected.out
#include <torch/torch.h>
int main() {
  auto loss = torch::randn({2}).sum();
  loss.backward();
}
