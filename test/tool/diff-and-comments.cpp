// --diff prints a unified diff that patch(1) applies to give exactly the
// migrated file, and writes nothing. --comments marks the lines a person
// must read, once.
// RUN: rm -rf %t && mkdir -p %t/src && cp %s %t/src/train.cpp
// RUN: %fabricize --diff %t/src/train.cpp -- %flags > %t/changes.diff 2> /dev/null; test $? -eq 1
// RUN: diff %s %t/src/train.cpp
// RUN: FileCheck %s --input-file=%t/changes.diff --check-prefix=DIFF
// DIFF: --- a/train.cpp
// DIFF-NEXT: +++ b/train.cpp
// DIFF: -  loss.backward();
// DIFF-NEXT: +  fabric.backward(loss);
// RUN: %fabricize --stdout %t/src/train.cpp -- %flags > %t/expected.cpp 2> /dev/null; test $? -eq 1
// RUN: cd %t/src && patch -p1 < %t/changes.diff && diff %t/expected.cpp %t/src/train.cpp
//
// RUN: cp %s %t/commented.cpp
// RUN: %fabricize -i --comments %t/commented.cpp -- %flags 2> /dev/null; test $? -eq 1
// RUN: FileCheck %s --input-file=%t/commented.cpp --check-prefix=COMMENT
// COMMENT: {{^  }}torch::Device second("cuda:1");  // fabricize(fabric-hardcoded-device): hard-coded device index
// RUN: cp %t/commented.cpp %t/once.cpp
// RUN: %fabricize -i --comments %t/commented.cpp -- %flags 2> /dev/null; test $? -eq 1
// RUN: diff %t/once.cpp %t/commented.cpp
#include <torch/torch.h>

int main() {
  torch::Device second("cuda:1");
  torch::Tensor loss = torch::ones({1}, second);
  loss.backward();
  return 0;
}
