// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: FileCheck %s --check-prefix=ERR --input-file=%t.err
// RUN: %migrate %t.cpp -- %flags > %t.again.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t.again.cpp
#include <torch/torch.h>
#include <fabric/fabric.h>

// No Fabric here, and none can be passed in (nothing calls it): untouched,
// and an error, since every rank would train without synchronising.
// ERR: fabric-backward.cpp:[[@LINE+2]]:37: warning: not migrated (backward through the Fabric{{.*}}): nothing in the project calls `pretrain`; it does not run in this program{{.*}}[fabric-backward]
// CHECK: {{^}}void pretrain(torch::Tensor loss) { loss.backward(); }
void pretrain(torch::Tensor loss) { loss.backward(); }

// A function that receives the Fabric.
// CHECK: {{^}}void step(fabric::Fabric& fabric, torch::Tensor loss) { fabric.backward(loss); }
void step(fabric::Fabric& fabric, torch::Tensor loss) { loss.backward(); }

// Whatever the Fabric is called where the rule matches: a parameter, a
// member of the enclosing class.
// CHECK: {{^}}void step_named(fabric::Fabric& shared, torch::Tensor loss) { shared.backward(loss); }
void step_named(fabric::Fabric& shared, torch::Tensor loss) { loss.backward(); }
// CHECK: {{^}}  void step(torch::Tensor loss) { fabric_.backward(loss); }
class Trainer {
 public:
  explicit Trainer(fabric::Fabric& fabric) : fabric_(fabric) {}
  void step(torch::Tensor loss) { loss.backward(); }

 private:
  fabric::Fabric& fabric_;
};

// A function template is migrated once, in its pattern, not per instantiation.
// CHECK: {{^}}template <class Model>
// CHECK-NEXT: {{^}}void train_step(fabric::Fabric& fabric, Model& model, torch::Tensor x) {
// CHECK-NEXT: {{^  }}auto autocast = fabric.autocast();
// CHECK-NEXT: {{^  }}torch::Tensor loss = model->forward(x).sum();
// CHECK-NEXT: {{^  }}fabric.backward(loss);
// CHECK-NEXT: {{^}}}
template <class Model>
void train_step(fabric::Fabric& fabric, Model& model, torch::Tensor x) {
  torch::Tensor loss = model->forward(x).sum();
  loss.backward();
}
struct TinyImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Tiny);
void use_template(fabric::Fabric& fabric, Tiny& tiny) { train_step(fabric, tiny, torch::ones({2})); }

// CHECK: {{^  }}fabric.backward(loss);
// CHECK-NEXT: {{^  }}fabric.backward(loss, grad, /*retain_graph=*/true);
// CHECK-NEXT: {{^  }}fabric.backward(losses["total"]);
// CHECK-NEXT: {{^  }}fabric.backward(loss);
// CHECK-NEXT: {{^  }}auto closure = [&] { fabric.backward(loss); };
// CHECK-NEXT: {{^  }}closure();
// CHECK-NEXT: {{^  }}loss.sum();
int main() {
  torch::Tensor loss, grad;
  std::map<std::string, torch::Tensor> losses;
  loss.backward();
  loss.backward(grad, /*retain_graph=*/true);
  losses["total"].backward();
  torch::autograd::backward({loss});
  auto closure = [&] { loss.backward(); };
  closure();
  loss.sum();
  return 0;
}
