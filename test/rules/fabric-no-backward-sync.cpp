// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: FileCheck %s --check-prefix=ERR --input-file=%t.err
// RUN: FileCheck %s --check-prefix=NOT --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags > %t.again.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t.again.cpp
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

// A counter modulo k, incremented in the condition: restated without the increment.
// CHECK-LABEL: {{^}}void counter_in_condition(
// CHECK: {{^}}    auto no_sync = fabric.no_backward_sync(model, (batches + 1) % accumulate != 0);
// CHECK-NEXT: {{^}}    fabric.backward(loss / accumulate);
void counter_in_condition(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x) {
  const int accumulate = 4;
  int batches = 0;
  for (int i = 0; i < 100; ++i) {
    auto loss = model->forward(x).sum();
    (loss / accumulate).backward();
    if (++batches % accumulate == 0) {
      optimizer.step();
      optimizer.zero_grad();
    }
  }
}

// An index without side effects, the last batch of the epoch stepping too.
// CHECK-LABEL: {{^}}void index_or_last(
// CHECK: {{^}}    auto no_sync = fabric.no_backward_sync(model, !((i + 1) % k == 0 || i + 1 == n));
// CHECK-NEXT: {{^}}    fabric.backward(loss);
void index_or_last(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x, int n, int k) {
  for (int i = 0; i < n; ++i) {
    auto loss = model->forward(x).sum();
    loss.backward();
    if ((i + 1) % k == 0 || i + 1 == n) {
      optimizer.step();
      optimizer.zero_grad();
    }
  }
}

// A counter advanced between the backward and the condition: read one ahead.
// CHECK-LABEL: {{^}}void counter_between(
// CHECK: {{^}}    auto no_sync = fabric.no_backward_sync(model, (step + 1) % k != 0);
// CHECK-NEXT: {{^}}    fabric.backward(loss);
// CHECK-NEXT: {{^}}    step++;
void counter_between(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x, int k) {
  long step = 0;
  while (step < 1000) {
    auto loss = model->forward(x).sum();
    loss.backward();
    step++;
    if (step % k == 0) {
      optimizer.step();
      optimizer.zero_grad();
    }
  }
}

// A flag set before the backward.
// CHECK-LABEL: {{^}}void flag(
// CHECK: {{^}}    auto no_sync = fabric.no_backward_sync(model, !(sync));
void flag(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x) {
  for (int i = 0; i < 10; ++i) {
    const bool sync = i % 2 == 1;
    auto loss = model->forward(x).sum();
    loss.backward();
    if (sync) optimizer.step();
  }
}

// An inner loop over micro-batches, the step after it.
// CHECK-LABEL: {{^}}void micro_batches(
// CHECK: {{^}}      auto no_sync = fabric.no_backward_sync(model, m + 1 < micro);
// CHECK-NEXT: {{^}}      fabric.backward(loss / micro);
void micro_batches(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x, int micro) {
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    for (int m = 0; m < micro; ++m) {
      auto loss = model->forward(x).sum();
      (loss / micro).backward();
    }
    optimizer.step();
  }
}

// No accumulation: a step after every backward gets nothing.
// NOT: {{^}}void every_step(
// NOT-NOT: {{^ *auto no_sync}}
void every_step(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x) {
  for (int i = 0; i < 10; ++i) {
    auto loss = model->forward(x).sum();
    loss.backward();
    optimizer.step();
    if (i % 5 == 0) std::cout << i << std::endl;
  }
}

// A condition with a call in it cannot be restated: reported, left alone.
// ERR: fabric-no-backward-sync.cpp:[[@LINE+5]]:5: warning: gradient accumulation: every micro-batch's backward all-reduces (fabricize cannot restate its condition `should_step(i % 4)` before the backward pass){{.*}}[fabric-no-backward-sync]
bool should_step(int i);
void called(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x) {
  for (int i = 0; i < 10; ++i) {
    auto loss = model->forward(x).sum();
    loss.backward();
    if (should_step(i % 4)) optimizer.step();
  }
}

// A step skipped for a reason that is not a count (a loss that is not
// finite) is not accumulation: nothing written, nothing reported.
// ERR-NOT: [[@LINE+5]]:{{.*}}[fabric-no-backward-sync]
bool finite(const torch::Tensor& loss);
void skip_bad_steps(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x) {
  for (int i = 0; i < 10; ++i) {
    auto loss = model->forward(x).sum();
    loss.backward();
    const bool ok = finite(loss);
    if (ok) optimizer.step();
  }
}

int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  auto x = torch::ones({2});
  counter_in_condition(model, optimizer, x);
  index_or_last(model, optimizer, x, 10, 4);
  counter_between(model, optimizer, x, 4);
  flag(model, optimizer, x);
  micro_batches(model, optimizer, x, 4);
  every_step(model, optimizer, x);
  called(model, optimizer, x);
  skip_bad_steps(model, optimizer, x);
  // NOT: {{^}}int main(
  return 0;
}
