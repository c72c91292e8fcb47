// RUN: %migrate %s -- %flags > %t.cpp
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags | diff -u %t.cpp -
// The real data_parallel.h needs CUDA headers, so this rule is tested on the
// stub; scripts/test_libtorch2.sh migrates, builds and runs a program that
// calls the real one (test/libtorch2/data_parallel).
#include <torch/torch.h>

#include <memory>
#include <vector>

struct NetImpl : torch::nn::Module {
  NetImpl();
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

// A helper gets no Fabric of its own (nothing in it needs one): the call
// still becomes a plain forward.
// CHECK-LABEL: {{^}}torch::Tensor run_model(Net& model, const torch::Tensor& x) {
// CHECK-NEXT: {{^  }}if (torch::cuda::device_count() > 1) return model->forward(x);
torch::Tensor run_model(Net& model, const torch::Tensor& x) {
  if (torch::cuda::device_count() > 1) return torch::nn::parallel::data_parallel(model, x);
  return model->forward(x);
}

// In a template, the call is resolved in its instantiations.
// CHECK-LABEL: {{^}}torch::Tensor run_any(Module& module, torch::Tensor x) {
// CHECK-NEXT: {{^  }}return module->forward(x);
template <typename Module>
torch::Tensor run_any(Module& module, torch::Tensor x) {
  return torch::nn::parallel::data_parallel(module, x);
}

// The forwards it becomes run under the precision's autocast scope (fabric-autocast).
// CHECK: {{^  }}auto autocast = fabric.autocast();
// CHECK-NEXT: {{^  }}auto y = model->forward(x);
// CHECK-NEXT: {{^  }}auto z = model->forward(x * 2.0);
// CHECK-NEXT: {{^  }}auto w = model->forward(x);
// The module is parenthesised where `->` would bind tighter than it.
// CHECK-NEXT: {{^  }}auto u = (*boxed)->forward(x);
// CHECK-NEXT: {{^  }}auto v = (many ? nets[0] : nets[1])->forward(x);
// CHECK-NEXT: {{^  }}auto s = model.ptr()->forward(x);
// CHECK-NEXT: {{^  }}auto t = run_model(model, x) + run_any(model, x);
int main() {
  Net model;
  auto boxed = std::make_unique<Net>();
  std::vector<Net> nets(2);
  bool many = torch::cuda::device_count() > 1;
  torch::Tensor x;
  auto y = torch::nn::parallel::data_parallel(model, x);
  auto z = torch::nn::parallel::data_parallel(model, x * 2.0, c10::nullopt, c10::nullopt, 0);
  auto w = model->forward(x);
  auto u = torch::nn::parallel::data_parallel(*boxed, x);
  auto v = torch::nn::parallel::data_parallel(many ? nets[0] : nets[1], x);
  auto s = torch::nn::parallel::data_parallel(model.ptr(), x);
  auto t = run_model(model, x) + run_any(model, x);
  return 0;
}
