// Found by the fuzz harness (fuzz_variants.py, seed 2): a device move inside
// a macro argument is left unmigrated and reported, so the device variable it
// uses must stay; removing it left an output that did not compile.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %fabricize --stdout %s -- %flags > %t/out.cpp 2> %t/err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t/out.cpp
// RUN: FileCheck %s --input-file=%t/err --check-prefix=FINDING
// RUN: clang++ -fsyntax-only %flags %t/out.cpp
// RUN: %fabricize --stdout %t/out.cpp -- %flags > %t/again.cpp 2>/dev/null; test $? -eq 1
// RUN: cmp %t/out.cpp %t/again.cpp
// CHECK: torch::Device device(torch::kCUDA);
// CHECK: FZ_STMT(torch::Tensor x = torch::randn({8, 4}).to(device));
// CHECK: fabric.backward(loss);
// FINDING: warning: not migrated: the code is inside a macro expansion {{.*}}[fabric-device-move]
#include <torch/torch.h>

#define FZ_STMT(...) __VA_ARGS__

struct NetImpl : torch::nn::Module {
  NetImpl() : fc(register_module("fc", torch::nn::Linear(4, 1))) {}
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

int main() {
  torch::Device device(torch::kCUDA);
  Net model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  FZ_STMT(torch::Tensor x = torch::randn({8, 4}).to(device));
  optimizer.zero_grad();
  torch::Tensor loss = torch::mse_loss(model->forward(x), x);
  loss.backward();
  optimizer.step();
  return 0;
}
