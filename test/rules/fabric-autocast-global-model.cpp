// (Exit code 1: the loop reads no data loader, which another rule reports.)
// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: FileCheck %s --check-prefix=NOT --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags > %t.again.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t.again.cpp
//
// fabric-autocast: the program keeps its model at namespace scope and runs
// it in a helper that is handed nothing but data. The helper gets no Fabric
// (it has no backward); its caller opens the scope before calling it.
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl() { fc = register_module("fc", torch::nn::Linear(2, 1)); }
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Net);

Net model;

// NOT-NOT: {{^ *auto (fabric_)?autocast = }}
// NOT: {{^}}torch::Tensor predict(const torch::Tensor& x) { return model->forward(x); }
torch::Tensor predict(const torch::Tensor& x) { return model->forward(x); }
// Touches no module: its call needs no scope.
// NOT: {{^}}torch::Tensor scaled(const torch::Tensor& x) { return x * 2; }
torch::Tensor scaled(const torch::Tensor& x) { return x * 2; }
// NOT: {{^}}int main() {

int main() {
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  auto x = torch::ones({4, 2});
  auto y = torch::zeros({4, 1});
  // CHECK: {{^}}  auto z = scaled(x);
  auto z = scaled(x);
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    // CHECK: {{^}}    auto autocast = fabric.autocast();
    // CHECK-NEXT: {{^}}    auto loss = torch::mse_loss(predict(z), y);
    auto loss = torch::mse_loss(predict(z), y);
    loss.backward();
    optimizer.step();
  }
  return 0;
}
