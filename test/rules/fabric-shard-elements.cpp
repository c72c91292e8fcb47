// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: FileCheck %s --check-prefix=MSG --input-file=%t.err --implicit-check-not='warning:'
// RUN: %migrate %t.cpp -- %flags > %t.again.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t.again.cpp
#include <torch/torch.h>

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

struct NetImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

struct Batch {
  torch::Tensor x, y;
};

// Batches prepared once, before training (token windows of a text, say).
std::vector<Batch> make_batches(const torch::Tensor& X, const torch::Tensor& Y, int64_t bs);

// A vector of prepared batches, reshuffled each epoch with the program's
// own engine: each rank takes its share, of rank 0's order.
// CHECK-LABEL: {{^}}void train(fabric::Fabric& fabric, Net& model,
// CHECK: {{^}}    fabric.shuffle(batches.begin(), batches.end(), rng);{{$}}
// CHECK-NEXT: {{^}}    for (auto& batch : fabric.shard_elements(batches)) {{{$}}
void train(Net& model, torch::optim::Optimizer& optimizer, std::vector<Batch>& batches, int epochs) {
  std::mt19937 rng(42);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    std::shuffle(batches.begin(), batches.end(), rng);
    for (auto& batch : batches) {
      auto loss = torch::mse_loss(model->forward(batch.x), batch.y);
      loss.backward();
      optimizer.step();
    }
  }
}

// A temporary container (made for each epoch by a function of data every
// rank holds): the view owns it for the loop.
// CHECK-LABEL: {{^}}void train_fresh(
// CHECK: {{^}}    for (const auto& batch : fabric.shard_elements(make_batches(X, Y, 32))) {{{$}}
void train_fresh(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& X, const torch::Tensor& Y) {
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (const auto& batch : make_batches(X, Y, 32)) {
      auto loss = torch::mse_loss(model->forward(batch.x), batch.y);
      loss.backward();
      optimizer.step();
    }
  }
}

// An evaluation over pairs with sums read after: every pair once, sums
// all-reduced.
// CHECK-LABEL: {{^}}double evaluate(
// CHECK: {{^}}  for (const auto& pair : fabric.shard_elements(pairs)) {{{$}}
// CHECK: {{^}}  total = fabric.all_reduce(total, fabric::ReduceOp::Sum);{{$}}
// CHECK-NEXT: {{^}}  count = fabric.all_reduce(count, fabric::ReduceOp::Sum);{{$}}
double evaluate(Net& model, const std::vector<std::pair<torch::Tensor, torch::Tensor>>& pairs) {
  torch::NoGradGuard no_grad;
  double total = 0;
  int64_t count = 0;
  for (const auto& pair : pairs) {
    total += torch::mse_loss(model->forward(pair.first), pair.second).item<double>();
    ++count;
  }
  return total / count;
}

// Not changed: a fixed list written in the code, and a buffer the loop's
// enclosing loop fills itself (each rank's own experience).
// CHECK-LABEL: {{^}}void probe(
// CHECK: {{^}}  for (const auto& x : {a, b}) fabric.print()
// CHECK-LABEL: {{^}}void replay(
// CHECK: {{^}}    for (auto& item : buffer) {{{$}}
void probe(Net& model, const torch::Tensor& a, const torch::Tensor& b) {
  for (const auto& x : {a, b}) std::cout << model->forward(x).sum().item<float>() << "\n";
}
void replay(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& X) {
  for (int round = 0; round < 4; ++round) {
    std::vector<Batch> buffer;
    buffer.push_back({model->forward(X).detach(), X});
    // MSG: fabric-shard-elements.cpp:[[@LINE+1]]:5: warning: this training loop's data is not split across ranks: it runs over `buffer`, which the loops around it make anew{{.*}}[fabric-own-dataloader]
    for (auto& item : buffer) {
      auto loss = torch::mse_loss(model->forward(item.y), item.x);
      loss.backward();
      optimizer.step();
    }
  }
}

int main() {
  Net model;
  torch::optim::Adam optimizer(model->parameters());
  torch::Tensor X = torch::randn({512, 4}), Y = torch::randn({512, 1});
  std::vector<Batch> batches = make_batches(X, Y, 32);
  train(model, optimizer, batches, 3);
  train_fresh(model, optimizer, X, Y);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs{{X, Y}};
  std::printf("%f\n", evaluate(model, pairs));
  probe(model, X, Y);
  replay(model, optimizer, X);
  return 0;
}
