// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: FileCheck %s --check-prefix=ERR --input-file=%t.err
// RUN: FileCheck %s --check-prefix=NOT --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags > %t.again.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t.again.cpp
#include <torch/torch.h>

// A module's own code runs inside its caller's scope: nothing is opened here.
// NOT-NOT: {{^ *auto (fabric_)?autocast = }}
// NOT: {{^}}struct NetImpl
struct NetImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) {
    auto h = fc1->forward(x);
    return fc2(h);
  }
  torch::Tensor encode(torch::Tensor x) { return fc1(x); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Net);
// NOT: {{^}}TORCH_MODULE(Net);

// A helper that gets no Fabric for anything else: its caller's scope covers it.
// NOT-NOT: {{^ *auto (fabric_)?autocast = }}
// NOT: {{^}}double evaluate(Net& model, const torch::Tensor& x) {
double evaluate(Net& model, const torch::Tensor& x) {
  torch::NoGradGuard no_grad;
  auto out = model->forward(x);
  return out.sum().item<double>();
}
// NOT: {{^}}}

// A helper that trains gets the Fabric (for its backward), and opens its own scope.
// CHECK: {{^}}void train_step(fabric::Fabric& fabric, Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x) {
// CHECK-NEXT: {{^}}  auto autocast = fabric.autocast();
// CHECK-NEXT: {{^}}  auto loss = model->forward(x).sum();
void train_step(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x) {
  auto loss = model->forward(x).sum();
  loss.backward();
  optimizer.step();
}

// A class that holds the model and evaluates it (no optimizer, so no Fabric
// of its own): the scope opens where it is called.
// NOT: {{^}}struct Evaluator {
// NOT-NOT: {{^ *auto (fabric_)?autocast = }}
struct Evaluator {
  explicit Evaluator(Net model) : model_(model) {}
  double run(const torch::Tensor& x) { return model_->forward(x).sum().item<double>(); }
  Net model_;
};
// NOT: {{^}}};
// CHECK: {{^}}void report(fabric::Fabric& fabric, Evaluator& evaluator, const torch::Tensor& x) {
// CHECK-NEXT: {{^}}  auto autocast = fabric.autocast();
// CHECK-NEXT: {{^}}  fabric.print() << evaluator.run(x) << std::endl;
void report(Evaluator& evaluator, const torch::Tensor& x) {
  std::cout << evaluator.run(x) << std::endl;
}

// Declared here, defined elsewhere: handed the model and data, it runs it.
double validate(Net& model, const torch::Tensor& x);
// Handed the model only: it does not run it.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(Net& model);

// A variable of the program's own named `autocast`: the scope takes another name.
// CHECK: {{^}}void log_predictions(fabric::Fabric& fabric, Net& model, const torch::Tensor& x) {
// CHECK-NEXT: {{^}}  auto fabric_autocast = fabric.autocast();
// CHECK-NEXT: {{^}}  torch::Tensor autocast = model(x);
void log_predictions(Net& model, const torch::Tensor& x) {
  torch::Tensor autocast = model(x);
  std::cout << autocast.sum().item<float>() << std::endl;
}

// On the line of its brace: the scope goes in front of the statement.
// CHECK: {{^}}  for (int i = 0; i < 2; ++i) { auto autocast = fabric.autocast(); fabric.print() << model(x).sum().item<float>(); }
void one_line(Net& model, const torch::Tensor& x) {
  for (int i = 0; i < 2; ++i) { std::cout << model(x).sum().item<float>(); }
}

// Under a case label: the scope opens before the switch.
// CHECK: {{^}}  auto autocast = fabric.autocast();
// CHECK-NEXT: {{^}}  switch (x.dim()) {
void by_case(Net& model, const torch::Tensor& x) {
  switch (x.dim()) {
    case 2:
      std::cout << model(x).sum().item<float>();
      break;
    default:
      break;
  }
}

int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  auto x = torch::ones({4, 2});
  auto y = torch::zeros({4, 1});
  // CHECK-NOT: {{^ *auto autocast}}
  // CHECK: {{^}}  auto extra = make_optimizer(model);
  auto extra = make_optimizer(model);
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    // CHECK: {{^}}    // the forward and its loss
    // CHECK-NEXT: {{^}}    auto autocast = fabric.autocast();
    // CHECK-NEXT: {{^}}    auto out = model->forward(x);
    // the forward and its loss
    auto out = model->forward(x);
    // A second forward in the same block is covered by the first scope.
    // CHECK-NOT: {{^ *auto autocast}}
    // CHECK: {{^}}    auto again = model(x);
    auto again = model(x);
    auto loss = torch::mse_loss(out + again, y);
    // And one in a nested block after it.
    if (step % 5 == 0) {
      // CHECK-NOT: {{^ *auto autocast}}
      // CHECK: {{^}}      auto code = model->encode(x * 2);
      auto code = model->encode(x * 2);
    }
    loss.backward();
    optimizer.step();
  }
  // A helper that trains is called outside any scope: it opens its own.
  // CHECK: {{^}}  train_step(fabric, model, optimizer, x);
  train_step(model, optimizer, x);
  // A forward first in a nested block, then one in the outer block: two scopes.
  if (x.numel() > 1) {
    // CHECK: {{^}}    auto autocast = fabric.autocast();
    // CHECK-NEXT: {{^}}    auto first = model->forward(x);
    auto first = model->forward(x);
  }
  // A helper that runs the model: the scope opens before its call.
  // CHECK: {{^}}  auto autocast = fabric.autocast();
  // CHECK-NEXT: {{^}}  double accuracy = evaluate(model, x) + validate(model, x);
  double accuracy = evaluate(model, x) + validate(model, x);
  // A closure that captures by reference opens its own scope.
  // CHECK: {{^}}  auto closure = [&] {
  // CHECK-NEXT: {{^}}    auto autocast = fabric.autocast();
  // CHECK-NEXT: {{^}}    return torch::mse_loss(model->forward(x), y);
  auto closure = [&] {
    return torch::mse_loss(model->forward(x), y);
  };
  // One that captures by name gets the Fabric added to its captures (and
  // no finding: the forward runs under the scope like any other).
  // ERR-NOT: [fabric-autocast]
  // CHECK: {{^}}  auto copy = [model, x, &fabric]() mutable { auto autocast = fabric.autocast(); return model->forward(x); };
  auto copy = [model, x]() mutable { return model->forward(x); };
  closure();
  copy();
  Evaluator evaluator(model);
  report(evaluator, x);
  log_predictions(model, x);
  one_line(model, x);
  by_case(model, x);
  // data_parallel becomes a forward, in the scope opened above.
  // CHECK: {{^}}  {
  // CHECK-NEXT: {{^}}    auto parallel = model->forward(x);
  {
    auto parallel = torch::nn::parallel::data_parallel(model, x);
  }
  return 0;
}
