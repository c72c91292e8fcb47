// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: FileCheck %s --check-prefix=MSG --input-file=%t.err --implicit-check-not='warning:'
// RUN: %migrate %t.cpp -- %flags > %t.again.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t.again.cpp
//
// A loader class that copies each batch's indices out of its order through
// iterators (`order_.begin() + pos_`), and a program that divides its sums by
// the loader's own counts: the class is sharded, and a sum all-reduced over
// the ranks is divided by the count summed over them. A loop that counts its
// own passes over the sharded loader would ask it for more batches than the
// share holds: reported. Over a ring that wraps its cursor it never runs out:
// no finding.
#include <torch/torch.h>

#include <algorithm>
#include <iostream>
#include <numeric>
#include <random>
#include <vector>

struct NetImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

// CHECK-LABEL: {{^}}class Loader {
// CHECK: {{^}}    std::iota(all_order_.begin(), all_order_.end(), 0);{{$}}
// CHECK-NEXT: {{^}}    order_ = fabric::shard(all_order_);{{$}}
// CHECK: {{^}}    std::shuffle(all_order_.begin(), all_order_.end(), rng_);{{$}}
// CHECK-NEXT: {{^}}    order_ = fabric::shard(all_order_);{{$}}
// CHECK: {{^}}  std::vector<size_t> all_order_;  // every rank's order; order_ holds this rank's share{{$}}
class Loader {
 public:
  Loader(torch::Tensor x, torch::Tensor y, size_t bs) : x_(x), y_(y), bs_(bs), order_(static_cast<size_t>(x.size(0))) {
    std::iota(order_.begin(), order_.end(), 0);
  }
  void reset() {
    std::shuffle(order_.begin(), order_.end(), rng_);
    pos_ = 0;
  }
  bool has_next() const { return pos_ < order_.size(); }
  std::pair<torch::Tensor, torch::Tensor> next() {
    size_t end = std::min(pos_ + bs_, order_.size());
    std::vector<int64_t> rows(order_.begin() + pos_, order_.begin() + end);
    pos_ = end;
    auto index = torch::tensor(rows);
    return {x_.index_select(0, index), y_.index_select(0, index)};
  }
  size_t num_batches() const { return (order_.size() + bs_ - 1) / bs_; }
  size_t size() const { return order_.size(); }

 private:
  torch::Tensor x_, y_;
  size_t bs_;
  std::vector<size_t> order_;
  size_t pos_ = 0;
  std::mt19937 rng_{1};
};

// A ring: the cursor wraps around the order, so it never runs out.
// CHECK-LABEL: {{^}}class Ring {
// CHECK: {{^}}  void reset() { std::shuffle(all_order_.begin(), all_order_.end(), rng_); order_ = fabric::shard(all_order_); }{{$}}
class Ring {
 public:
  Ring(torch::Tensor x, size_t bs) : x_(x), bs_(bs), order_(static_cast<size_t>(x.size(0))) {
    std::iota(order_.begin(), order_.end(), 0);
  }
  void reset() { std::shuffle(order_.begin(), order_.end(), rng_); }
  torch::Tensor next() {
    std::vector<int64_t> rows;
    for (size_t k = 0; k < bs_; ++k) rows.push_back(static_cast<int64_t>(order_[(pos_ + k) % order_.size()]));
    pos_ += bs_;
    return x_.index_select(0, torch::tensor(rows));
  }

 private:
  torch::Tensor x_;
  size_t bs_;
  std::vector<size_t> order_;
  size_t pos_ = 0;
  std::mt19937 rng_{2};
};

// CHECK-LABEL: {{^}}int main() {
// CHECK: {{^}}    total = fabric.all_reduce(total, fabric::ReduceOp::Sum);{{$}}
// CHECK-NEXT: {{^}}    fabric.print() << "train loss " << total / fabric.all_reduce(train.num_batches(), fabric::ReduceOp::Sum) << std::endl;{{$}}
// CHECK: {{^}}    valid_loss = fabric.all_reduce(valid_loss, fabric::ReduceOp::Sum);{{$}}
// CHECK-NEXT: {{^}}    fabric.print() << "valid loss " << valid_loss / fabric.all_reduce(valid.size(), fabric::ReduceOp::Sum) << std::endl;{{$}}
int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  Loader train(torch::randn({100, 8}), torch::randn({100, 1}), 16);
  Loader valid(torch::randn({30, 8}), torch::randn({30, 1}), 16);
  for (int epoch = 0; epoch < 3; ++epoch) {
    train.reset();
    double total = 0;
    while (train.has_next()) {
      auto [x, y] = train.next();
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
    }
    std::cout << "train loss " << total / train.num_batches() << std::endl;
    torch::NoGradGuard no_grad;
    valid.reset();
    double valid_loss = 0;
    while (valid.has_next()) {
      auto [x, y] = valid.next();
      valid_loss += torch::mse_loss(model->forward(x), y).item<double>() * x.size(0);
    }
    std::cout << "valid loss " << valid_loss / valid.size() << std::endl;
  }
  // MSG: [[@LINE+1]]:3: warning: this training loop runs more passes than its rank's share of the data holds: it counts its own passes (`step < 6`) and takes a batch from `Loader` in each{{.*}}[fabric-own-dataloader]
  for (int step = 0; step < 6; ++step) {
    auto [x, y] = train.next();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
  }
  Ring ring(torch::randn({40, 8}), 8);
  ring.reset();
  for (int step = 0; step < 20; ++step) {
    auto loss = model->forward(ring.next()).pow(2).mean();
    loss.backward();
    optimizer.step();
  }
  return 0;
}
