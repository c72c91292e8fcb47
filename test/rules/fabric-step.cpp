// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: FileCheck %s --check-prefix=ERR --input-file=%t.err
// RUN: %migrate %t.cpp -- %flags > %t.again.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t.again.cpp
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

// No Fabric here, and none can be passed in (nothing calls it): untouched, and an error.
// ERR: fabric-step.cpp:[[@LINE+2]]:50: warning: not migrated (step through the Fabric{{.*}}): nothing in the project calls `plain`{{.*}}[fabric-step]
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
  // A closure is passed on (its forward opens the autocast scope: fabric-autocast).
  // CHECK: {{^  }}auto loss = fabric.step(optimizer, [&] { auto autocast = fabric.autocast(); return model->forward(x).sum(); });
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
