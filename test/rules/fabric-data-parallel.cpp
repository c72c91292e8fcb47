// RUN: %migrate %s -- %flags > %t.cpp
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags | diff -u %t.cpp -
// The real data_parallel.h needs CUDA headers, so this rule is tested on the stub.
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl();
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

// CHECK: {{^  }}auto y = model->forward(x);
// CHECK-NEXT: {{^  }}auto z = model->forward(x * 2.0);
// CHECK-NEXT: {{^  }}auto w = model->forward(x);
int main() {
  Net model;
  torch::Tensor x;
  auto y = torch::nn::parallel::data_parallel(model, x);
  auto z = torch::nn::parallel::data_parallel(model, x * 2.0, c10::nullopt, c10::nullopt, 0);
  auto w = model->forward(x);
  return 0;
}
