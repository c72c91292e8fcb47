// RUN: %migrate %s -- %flags > %t.cpp
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags | diff -u %t.cpp -
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl();
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

// No Fabric in scope: untouched (threading one in is another rule's job).
// CHECK: {{^  }}torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
// CHECK-NEXT: {{^}}}
void pretrain(Net& net) {
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1));
}

// CHECK: {{^  }}torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
// CHECK-NEXT: {{^  }}fabric.setup(model, optimizer);
// Two optimizers over one module: one setup after the last, naming both.
// CHECK-NEXT: {{^  }}torch::optim::Adam head_opt(head->parameters());
// CHECK-NEXT: {{^  }}torch::optim::SGD head_sgd(head->parameters(), torch::optim::SGDOptions(0.01));
// CHECK-NEXT: {{^  }}fabric.setup(head, head_opt, head_sgd);
// CHECK-NEXT: {{^  }}auto y = model->forward(torch::randn({2, 4}));
int main() {
  Net model;
  torch::nn::Linear head(4, 2);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  torch::optim::Adam head_opt(head->parameters());
  torch::optim::SGD head_sgd(head->parameters(), torch::optim::SGDOptions(0.01));
  auto y = model->forward(torch::randn({2, 4}));
  return 0;
}

// Migrated code with a second optimizer the setup does not name: reported.
// RUN: %migrate %S/Inputs/setup-forgotten.cpp -- %flags > %t.forgotten.cpp 2> %t.forgotten.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.forgotten.err --check-prefix=FORGOTTEN
// RUN: diff %S/Inputs/setup-forgotten.cpp %t.forgotten.cpp
// FORGOTTEN: setup-forgotten.cpp:12:3: warning: optimizer over a set-up model that fabric.setup does not name{{.*}}[fabric-setup]
// FORGOTTEN-NOT: warning
