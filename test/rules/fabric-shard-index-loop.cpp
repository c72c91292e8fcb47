// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: FileCheck %s --check-prefix=MSG --input-file=%t.err --implicit-check-not='warning:'
// RUN: %migrate %t.cpp -- %flags > %t.again.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t.again.cpp
#include <torch/torch.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

struct NetImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

// A dataset read by index, stacked by hand.
struct Samples {
  size_t size() const;
  torch::Tensor get(size_t index) const;
  torch::Tensor label(size_t index) const;
};

// The whole data set in two tensors, sliced by hand; `std::min` for the
// last, short batch. Each rank takes every world_size()-th batch.
// CHECK-LABEL: {{^}}void train_slices(fabric::Fabric& fabric, Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& X,
// CHECK: {{^}}    for (int64_t i : fabric.shard_range<int64_t>(0, n, batch_size)) {{{$}}
// CHECK-NEXT: {{^}}      auto x = X.slice(0, i, std::min(i + batch_size, n));{{$}}
// CHECK: {{^}}    total = fabric.all_reduce(total, fabric::ReduceOp::Sum);{{$}}
// CHECK-NEXT: {{^}}    batches = fabric.all_reduce(batches, fabric::ReduceOp::Sum);{{$}}
void train_slices(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& X, const torch::Tensor& Y,
                  int64_t batch_size) {
  const int64_t n = X.size(0);
  for (int epoch = 0; epoch < 3; ++epoch) {
    double total = 0;
    int batches = 0;
    for (int64_t i = 0; i < n; i += batch_size) {
      auto x = X.slice(0, i, std::min(i + batch_size, n));
      auto y = Y.slice(0, i, std::min(i + batch_size, n));
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
      ++batches;
    }
    std::printf("loss %f\n", total / batches);
  }
}

// A batch counter: the position is computed from it (`start = b * bs`).
// CHECK-LABEL: {{^}}void train_batches(
// CHECK: {{^}}  for (int b : fabric.shard_range<int>(0, num_batches)) {{{$}}
void train_batches(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& X, const torch::Tensor& Y,
                   int bs) {
  const int num_batches = static_cast<int>(X.size(0)) / bs;
  for (int b = 0; b < num_batches; ++b) {
    const int start = b * bs;
    auto loss = torch::mse_loss(model->forward(X.narrow(0, start, bs)), Y.narrow(0, start, bs));
    loss.backward();
    optimizer.step();
  }
}

// Full batches only, unsigned (`i + bs <= n`), over a permutation drawn each
// epoch: the permutation is rank 0's on every rank so the shares never
// overlap; the end is computed so that it cannot wrap around.
// CHECK-LABEL: {{^}}void train_permuted(
// CHECK: {{^}}    auto perm = fabric.randperm(static_cast<int64_t>(n));{{$}}
// CHECK-NEXT: {{^}}    for (size_t i : fabric.shard_range<size_t>(0, n + 1 - std::min<size_t>(n + 1, bs), bs)) {{{$}}
void train_permuted(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& X, const torch::Tensor& Y,
                    size_t bs) {
  const size_t n = static_cast<size_t>(X.size(0));
  for (int epoch = 0; epoch < 2; ++epoch) {
    auto perm = torch::randperm(static_cast<int64_t>(n));
    for (size_t i = 0; i + bs <= n; i += bs) {
      auto idx = perm.slice(0, static_cast<int64_t>(i), static_cast<int64_t>(i + bs));
      auto loss = torch::mse_loss(model->forward(X.index_select(0, idx)), Y.index_select(0, idx));
      loss.backward();
      optimizer.step();
    }
  }
}

// A vector of indices shuffled with the program's own engine each epoch,
// read through iterators: the shuffle becomes rank 0's.
// CHECK-LABEL: {{^}}void train_shuffled_indices(
// CHECK: {{^}}    fabric.shuffle(order.begin(), order.end(), rng);{{$}}
// CHECK-NEXT: {{^}}    for (int64_t i : fabric.shard_range<int64_t>(0, n + 1 - bs, bs)) {{{$}}
void train_shuffled_indices(Net& model, torch::optim::Optimizer& optimizer, const Samples& data, int64_t bs) {
  std::vector<int64_t> order(data.size());
  std::mt19937 rng(std::random_device{}());
  const int64_t n = static_cast<int64_t>(order.size());
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t i = 0; i + bs <= n; i += bs) {
      std::vector<int64_t> ids(order.begin() + i, order.begin() + i + bs);
      std::vector<torch::Tensor> xs, ys;
      for (int64_t id : ids) {
        xs.push_back(data.get(static_cast<size_t>(id)));
        ys.push_back(data.label(static_cast<size_t>(id)));
      }
      auto loss = torch::mse_loss(model->forward(torch::stack(xs)), torch::stack(ys));
      loss.backward();
      optimizer.step();
    }
  }
}

// A dataset's get(i) in a plain loop over size(), stacked by hand; an inner
// loop over the batch's samples.
// CHECK-LABEL: {{^}}void train_get(
// CHECK: {{^}}  for (size_t i : fabric.shard_range<size_t>(0, data.size(), bs)) {{{$}}
// CHECK-NEXT: {{^}}    std::vector<torch::Tensor> xs, ys;{{$}}
void train_get(Net& model, torch::optim::Optimizer& optimizer, const Samples& data, size_t bs) {
  for (size_t i = 0; i < data.size(); i += bs) {
    std::vector<torch::Tensor> xs, ys;
    for (size_t j = i; j < std::min(i + bs, data.size()); ++j) {
      xs.push_back(data.get(j));
      ys.push_back(data.label(j));
    }
    auto loss = torch::mse_loss(model->forward(torch::stack(xs)), torch::stack(ys));
    loss.backward();
    optimizer.step();
  }
}

// An evaluation over slices, with sums read after: every position once,
// and the sums all-reduced.
// CHECK-LABEL: {{^}}double evaluate(
// CHECK: {{^}}  for (int64_t i : fabric.shard_range<int64_t>(0, X.size(0), 256)) {{{$}}
// CHECK: {{^}}  sq = fabric.all_reduce(sq, fabric::ReduceOp::Sum);{{$}}
double evaluate(Net& model, const torch::Tensor& X, const torch::Tensor& Y) {
  torch::NoGradGuard no_grad;
  double sq = 0;
  for (int64_t i = 0; i < X.size(0); i += 256) {
    sq += (model->forward(X.slice(0, i, i + 256)) - Y.slice(0, i, i + 256)).pow(2).sum().item<double>();
  }
  return sq / static_cast<double>(X.size(0));
}

// Not changed: the counter also decides when to step (gradient accumulation
// on the batch index): after sharding it would hold this rank's positions.
// CHECK-LABEL: {{^}}void train_accumulate(
// CHECK: {{^}}  for (int64_t b = 0; b < nb; ++b) {{{$}}
void train_accumulate(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& X, const torch::Tensor& Y) {
  const int64_t nb = X.size(0) / 32;
  // MSG: fabric-shard-index-loop.cpp:[[@LINE+1]]:3: warning: this training loop's data is not split across ranks: the counter decides what the loop does (`if ((b + 1) % 4 == 0)`){{.*}}fabric.shard_range{{.*}}[fabric-own-dataloader]
  for (int64_t b = 0; b < nb; ++b) {
    auto loss = torch::mse_loss(model->forward(X.narrow(0, b * 32, 32)), Y.narrow(0, b * 32, 32));
    loss.backward();
    if ((b + 1) % 4 == 0) optimizer.step();
  }
}

// Not changed: already split by hand across ranks.
// CHECK-LABEL: {{^}}void train_by_hand(
// CHECK: {{^}}  for (int64_t i = rank * 32; i < X.size(0); i += world_size * 32) {{{$}}
void train_by_hand(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& X, const torch::Tensor& Y,
                   int rank, int world_size) {
  for (int64_t i = rank * 32; i < X.size(0); i += world_size * 32) {
    auto loss = torch::mse_loss(model->forward(X.slice(0, i, i + 32)), Y.slice(0, i, i + 32));
    loss.backward();
    optimizer.step();
  }
}

// Not changed: a generation loop (no backward pass, nothing summed), and an
// evaluation over a fixed handful of inputs that only prints.
// CHECK-LABEL: {{^}}void sample(
// CHECK: {{^}}  for (int t = 0; t < 16; ++t) {{{$}}
// CHECK: {{^}}  for (int k = 0; k < 4; ++k) {{{$}}
void sample(Net& model, torch::Tensor context, const torch::Tensor& X) {
  torch::NoGradGuard no_grad;
  for (int t = 0; t < 16; ++t) {
    auto next = model->forward(context.slice(0, t, t + 1));
    context = torch::cat({context, next});
  }
  for (int k = 0; k < 4; ++k) {
    std::cout << model->forward(X[k]).item<float>() << "\n";
  }
}

// A shuffle at the top of a train_epoch() (in no loop around the loop), with
// an engine seeded per process: rank 0's order on every rank.
// CHECK-LABEL: {{^}}void train_epoch_shuffled(
// CHECK: {{^}}  fabric.shuffle(idx.begin(), idx.end(), rng);{{$}}
// CHECK-NEXT: {{^}}  for (size_t i : fabric.shard_range<size_t>(0, idx.size(), bs)) {{{$}}
void train_epoch_shuffled(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& X,
                          const torch::Tensor& Y, std::vector<int64_t>& idx, std::mt19937& rng, size_t bs) {
  std::shuffle(idx.begin(), idx.end(), rng);
  for (size_t i = 0; i < idx.size(); i += bs) {
    auto t = torch::tensor(std::vector<int64_t>(idx.begin() + i, idx.begin() + std::min(i + bs, idx.size())));
    auto loss = torch::mse_loss(model->forward(X.index_select(0, t)), Y.index_select(0, t));
    loss.backward();
    optimizer.step();
  }
}

// A permutation drawn once, before the loop.
// CHECK-LABEL: {{^}}void train_permuted_once(
// CHECK: {{^}}  auto perm = fabric.randperm(X.size(0));{{$}}
// CHECK-NEXT: {{^}}  for (int64_t i : fabric.shard_range<int64_t>(0, X.size(0), 64)) {{{$}}
void train_permuted_once(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& X,
                         const torch::Tensor& Y) {
  auto perm = torch::randperm(X.size(0));
  for (int64_t i = 0; i < X.size(0); i += 64) {
    auto idx = perm.slice(0, i, i + 64);
    auto loss = torch::mse_loss(model->forward(X.index_select(0, idx)), Y.index_select(0, idx));
    loss.backward();
    optimizer.step();
  }
}

// The rows put in a permutation's order each epoch (`Xs =
// X.index_select(0, perm)`): the permutation becomes rank 0's, and each rank
// takes its slices of the reordered rows.
// CHECK-LABEL: {{^}}void train_reordered(
// CHECK: {{^}}    auto perm = fabric.randperm(n);{{$}}
// CHECK: {{^}}    for (int64_t i : fabric.shard_range<int64_t>(0, n, bs)) {{{$}}
void train_reordered(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& X, const torch::Tensor& Y) {
  const int64_t n = X.size(0), bs = 32;
  for (int epoch = 0; epoch < 3; ++epoch) {
    auto perm = torch::randperm(n);
    auto Xs = X.index_select(0, perm);
    auto Ys = Y.index_select(0, perm);
    for (int64_t i = 0; i < n; i += bs) {
      auto loss = torch::mse_loss(model->forward(Xs.slice(0, i, std::min(i + bs, n))),
                                  Ys.slice(0, i, std::min(i + bs, n)));
      loss.backward();
      optimizer.step();
    }
  }
}

// A LoRA rank is no rank of the job: the loop is split.
// CHECK-LABEL: {{^}}void train_low_rank(
// CHECK: {{^}}  for (int64_t i : fabric.shard_range<int64_t>(0, X.size(0), 64)) {{{$}}
torch::Tensor low_rank(const torch::Tensor& w, int rank);
void train_low_rank(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& X, const torch::Tensor& Y) {
  const int rank = 4;
  for (int64_t i = 0; i < X.size(0); i += 64) {
    auto loss = torch::mse_loss(model->forward(low_rank(X.slice(0, i, i + 64), rank)), Y.slice(0, i, i + 64));
    loss.backward();
    optimizer.step();
  }
}

// Micro-batches of the batch the loop around takes: that loop is split, the
// micro-batch loop left as it is.
// CHECK-LABEL: {{^}}void train_micro_batches(
// CHECK: {{^}}  for (int64_t i : fabric.shard_range<int64_t>(0, n, bs)) {{{$}}
// CHECK: {{^}}    for (int64_t j = 0; j < bs; j += micro) {{{$}}
void train_micro_batches(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& X,
                         const torch::Tensor& Y) {
  const int64_t n = X.size(0), bs = 32, micro = 8;
  for (int64_t i = 0; i < n; i += bs) {
    auto xb = X.slice(0, i, i + bs);
    auto yb = Y.slice(0, i, i + bs);
    optimizer.zero_grad();
    for (int64_t j = 0; j < bs; j += micro) {
      auto loss = torch::mse_loss(model->forward(xb.slice(0, j, j + micro)), yb.slice(0, j, j + micro));
      // MSG: fabric-shard-index-loop.cpp:[[@LINE+1]]:7: warning: gradient accumulation: every micro-batch's backward all-reduces{{.*}}[fabric-no-backward-sync]
      loss.backward();
    }
    optimizer.step();
  }
}

int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  torch::Tensor X = torch::randn({1024, 8}), Y = torch::randn({1024, 1});
  Samples samples;
  train_slices(model, optimizer, X, Y, 64);
  train_batches(model, optimizer, X, Y, 64);
  train_permuted(model, optimizer, X, Y, 64);
  train_shuffled_indices(model, optimizer, samples, 64);
  train_get(model, optimizer, samples, 64);
  train_accumulate(model, optimizer, X, Y);
  train_by_hand(model, optimizer, X, Y, 0, 1);
  std::printf("test %f\n", evaluate(model, X, Y));
  sample(model, X.slice(0, 0, 1), X);
  std::vector<int64_t> idx(1024);
  std::iota(idx.begin(), idx.end(), 0);
  std::mt19937 rng(std::random_device{}());
  train_epoch_shuffled(model, optimizer, X, Y, idx, rng, 64);
  train_permuted_once(model, optimizer, X, Y);
  train_reordered(model, optimizer, X, Y);
  train_low_rank(model, optimizer, X, Y);
  train_micro_batches(model, optimizer, X, Y);
  return 0;
}
