// RUN: %migrate %s -- %flags > %t.cpp
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags | diff -u %t.cpp -
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

// Outside a Fabric scope: untouched.
// CHECK: {{^}}void plain(torch::optim::Optimizer& optimizer) { optimizer.step(); }
void plain(torch::optim::Optimizer& optimizer) { optimizer.step(); }

// A training class steps through its Fabric member.
// CHECK: {{^}}  void update() { fabric_.step(optimizer_); }
class Trainer {
 public:
  Trainer(Net model, torch::optim::Optimizer& optimizer) : model_(model), optimizer_(optimizer) {}
  void update() { optimizer_.step(); }

 private:
  Net model_;
  torch::optim::Optimizer& optimizer_;
};

int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  auto x = torch::ones({2});
  // CHECK: {{^  }}fabric.step(optimizer);
  optimizer.step();
  // A closure is passed on.
  // CHECK: {{^  }}auto loss = fabric.step(optimizer, [&] { return model->forward(x).sum(); });
  auto loss = optimizer.step([&] { return model->forward(x).sum(); });
  // Through a pointer.
  // CHECK: {{^  }}torch::optim::Optimizer* pointer = &optimizer;
  // CHECK-NEXT: {{^  }}fabric.step(*pointer);
  torch::optim::Optimizer* pointer = &optimizer;
  pointer->step();
  // CHECK: {{^  }}fabric.step(*owned);
  auto owned = std::make_unique<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  owned->step();
  return 0;
}
