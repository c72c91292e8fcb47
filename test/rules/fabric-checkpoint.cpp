// RUN: %migrate %s -- %flags > %t.cpp
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags | diff -u %t.cpp -
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl();
};
TORCH_MODULE(Net);

// CHECK: {{^  }}fabric.save("model.pt", model);
// CHECK-NEXT: {{^  }}fabric.save(path + ".opt", optimizer);
// CHECK-NEXT: {{^  }}fabric.load("model.pt", model);
// A tensor saved to a stream keeps torch's form: three arguments.
// CHECK-NEXT: {{^  }}torch::save(model, "a", "b");
int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  std::string path = "ckpt";
  torch::save(model, "model.pt");
  torch::save(optimizer, path + ".opt");
  torch::load(model, "model.pt");
  torch::save(model, "a", "b");
  return 0;
}
