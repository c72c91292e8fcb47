// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.err --implicit-check-not='[fabric-own-dataloader]'
#include <torch/torch.h>
#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t index) override;
  c10::optional<size_t> size() const override;
};

// A loader class of the project's own whose epoch is a number of steps it
// was given, not its list's length: the tool cannot shard it, and says so
// where its list is declared.
class StepLoader {
 public:
  StepLoader(size_t n, size_t steps) : steps_(steps) {
    for (size_t i = 0; i < n; ++i) indices_.push_back(i);
  }
  void reset() {
    cursor_ = 0;
    std::shuffle(indices_.begin(), indices_.end(), rng_);
  }
  bool next(torch::Tensor& batch) {
    if (cursor_ >= steps_) return false;
    batch = torch::tensor({static_cast<int64_t>(indices_[cursor_++])});
    return true;
  }

 private:
  // CHECK: fabric-own-dataloader.cpp:[[@LINE+1]]:23: warning: a data loader of the project's own, `StepLoader`, hands out batches by position in `indices_`, but it measures its epoch with `steps_`{{.*}}[fabric-own-dataloader]
  std::vector<size_t> indices_;
  size_t steps_;
  size_t cursor_ = 0;
  std::mt19937 rng_;
  // A list of names shuffled for a report: not indices.
  std::vector<std::string> names_;
  void shuffle_names() { std::shuffle(names_.begin(), names_.end(), rng_); }
};

// The project's own batching: every rank would read all of it.
class BatchIterator {
 public:
  BatchIterator(torch::Tensor x, torch::Tensor y, int64_t batch);
  bool has_next() const;
  std::pair<torch::Tensor, torch::Tensor> next();
};

// A loop over a template parameter is judged where the template is
// instantiated: over a torch::data loader here (main), so nothing to report,
// whether or not this translation unit instantiates it (a header's trainer
// is reported from no source that includes it without calling it).
struct Trainer {
  torch::nn::Linear model{nullptr};
  torch::optim::Optimizer* optimizer = nullptr;
  template <typename Loader>
  void epoch(Loader& loader) {
    for (auto& batch : loader) {
      torch::Tensor loss = torch::mse_loss(model->forward(batch.data), batch.target);
      loss.backward();
      optimizer->step();
    }
  }
  template <typename Loader>
  void unused_epoch(Loader& loader) {
    for (auto& batch : loader) {
      torch::Tensor loss = torch::mse_loss(model->forward(batch.data), batch.target);
      loss.backward();
      optimizer->step();
    }
  }
};

// Instantiated over the project's own batches: reported there.
template <typename Batches>
void fit_all(torch::nn::Linear& model, torch::optim::Optimizer& optimizer, Batches& batches) {
    // CHECK: fabric-own-dataloader.cpp:[[@LINE+1]]:3: warning: this training loop's data is not split across ranks: it runs over `batches`, whose type is a template argument{{.*}}[fabric-own-dataloader]
  for (auto& batch : batches) {
    torch::Tensor loss = torch::mse_loss(model->forward(batch.data), batch.target);
    loss.backward();
    optimizer.step();
  }
}

using TrainLoader = torch::data::StatelessDataLoader<
    torch::data::datasets::MapDataset<Points, torch::data::transforms::Stack<>>, torch::data::samplers::RandomSampler>;
std::unique_ptr<TrainLoader> train_loader;
torch::data::Iterator<torch::data::Example<>> train_iterator = train_loader->begin();
torch::data::Example<> next_batch() {
  if (!(train_iterator != train_loader->end())) train_iterator = train_loader->begin();
  torch::data::Example<> batch = *train_iterator;
  ++train_iterator;
  return batch;
}

// A loss summed over the batches of an inner loop, one backward pass per
// epoch: split, each rank's sum would cover its share and the averaged
// gradient 1/N of one process's.
void train_summed(torch::nn::Linear& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x,
                  const torch::Tensor& y) {
  // CHECK: fabric-own-dataloader.cpp:[[@LINE+1]]:3: warning: this training loop's data is not split across ranks: it sums the loss over the batches of the loop at line [[#@LINE+4]] and runs one backward pass after it{{.*}}fabric.world_size(){{.*}}[fabric-own-dataloader]
  for (int epoch = 0; epoch < 10; ++epoch) {
    optimizer.zero_grad();
    torch::Tensor total = torch::zeros({});
    for (int64_t i = 0; i < x.size(0); i += 32)
      total += torch::mse_loss(model->forward(x.slice(0, i, i + 32)), y.slice(0, i, i + 32));
    total.backward();
    optimizer.step();
  }
}

// The last, short batch skipped on a test of the batch: split, one rank would
// skip a backward pass the others run.
void train_drop_last(torch::nn::Linear& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x,
                     const torch::Tensor& y) {
  const int64_t n = x.size(0), bs = 48;
  // CHECK: fabric-own-dataloader.cpp:[[@LINE+1]]:3: warning: this training loop's data is not split across ranks: it skips or ends a pass on a test of its batch (`if (xb.size(0) < bs)`){{.*}}n - n % bs{{.*}}[fabric-own-dataloader]
  for (int64_t i = 0; i < n; i += bs) {
    auto xb = x.slice(0, i, std::min(i + bs, n));
    if (xb.size(0) < bs) continue;
    auto loss = torch::mse_loss(model->forward(xb), y.slice(0, i, i + bs));
    loss.backward();
    optimizer.step();
  }
}

// Positions counted by hand in a while loop.
void train_while(torch::nn::Linear& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x,
                 const torch::Tensor& y) {
  int64_t i = 0;
  // CHECK: fabric-own-dataloader.cpp:[[@LINE+1]]:3: warning: this training loop's data is not split across ranks: it advances its position `i` by hand (`i += 32`){{.*}}`for (int64_t i : fabric.shard_range<int64_t>(<first>, x.size(0), <step>))`, without the `i += 32`{{.*}}[fabric-own-dataloader]
  while (i < x.size(0)) {
    auto loss = torch::mse_loss(model->forward(x.slice(0, i, i + 32)), y.slice(0, i, i + 32));
    loss.backward();
    optimizer.step();
    i += 32;
  }
}

// The positions handed to a lambda that reads the batch.
void train_through_lambda(torch::nn::Linear& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x,
                          const torch::Tensor& y) {
  auto step = [&](int64_t i) {
    auto loss = torch::mse_loss(model->forward(x.slice(0, i, i + 32)), y.slice(0, i, i + 32));
    loss.backward();
    optimizer.step();
  };
  // CHECK: fabric-own-dataloader.cpp:[[@LINE+1]]:3: warning: this training loop's data is not split across ranks: the counter is handed to the lambda `step`, which indexes data with it{{.*}}[fabric-own-dataloader]
  for (int64_t i = 0; i < x.size(0); i += 32) step(i);
}

// A loader class of the project's own, read for a count of steps the
// program computes from the data set's size: once the class is sharded, the
// loop would ask it for more batches than this rank's share holds.
class ShuffledRows {
 public:
  ShuffledRows(torch::Tensor x, size_t bs) : x_(x), bs_(bs), order_(static_cast<size_t>(x.size(0))) {
    std::iota(order_.begin(), order_.end(), 0);
  }
  void shuffle() {
    std::shuffle(order_.begin(), order_.end(), rng_);
    pos_ = 0;
  }
  torch::Tensor next() {
    std::vector<int64_t> rows;
    for (size_t k = 0; k < bs_ && pos_ < order_.size(); ++k) rows.push_back(static_cast<int64_t>(order_[pos_++]));
    return x_.index_select(0, torch::tensor(rows));
  }
  size_t rows() const { return static_cast<size_t>(x_.size(0)); }

 private:
  torch::Tensor x_;
  size_t bs_;
  std::vector<size_t> order_;
  size_t pos_ = 0;
  std::mt19937 rng_{1};
};

void train_counted(torch::nn::Linear& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x) {
  ShuffledRows rows(x, 16);
  const size_t steps = (rows.rows() + 15) / 16;
  for (int epoch = 0; epoch < 3; ++epoch) {
    rows.shuffle();
    // CHECK: fabric-own-dataloader.cpp:[[@LINE+1]]:5: warning: this training loop runs more passes than its rank's share of the data holds: it counts its own passes (`s < steps`) and takes a batch from `ShuffledRows` in each{{.*}}[fabric-own-dataloader]
    for (size_t s = 0; s < steps; ++s) {
      auto loss = model->forward(rows.next()).pow(2).mean();
      loss.backward();
      optimizer.step();
    }
  }
}

// An environment of the project's own, played per rank.
struct Walk {
  std::mt19937 gen{123};
  std::uniform_real_distribution<float> u{0.f, 1.f};
  torch::Tensor reset() { return torch::zeros({4}); }
  bool step(int64_t action, torch::Tensor& obs) {
    obs = torch::full({4}, u(gen) + static_cast<float>(action));
    return u(gen) < 0.05f;
  }
};

// Episodes played to their end, then updates over what each collected: the
// number of updates is each rank's own, and the ranks would wait for each
// other.
void train_rollouts(torch::nn::Linear& policy, torch::optim::Optimizer& optimizer) {
  Walk env;
  for (int episode = 0; episode < 100; ++episode) {
    std::vector<torch::Tensor> observations;
    auto obs = env.reset();
    bool done = false;
    while (!done) {
      int64_t action = torch::multinomial(torch::softmax(policy->forward(obs), 0), 1).item<int64_t>();
      done = env.step(action, obs);
      observations.push_back(obs);
    }
    // CHECK: fabric-own-dataloader.cpp:[[@LINE+1]]:5: warning: this training loop's data is not split across ranks: its bound (`i < observations.size()`) is the length of `observations`, which each rank fills from its own play, to its own end{{.*}}fabric::ReduceOp::Min{{.*}}[fabric-own-dataloader]
    for (size_t i = 0; i < observations.size(); i += 8) {
      auto batch = torch::stack(std::vector<torch::Tensor>(observations.begin() + i,
                                                           observations.begin() + std::min(i + 8, observations.size())));
      auto loss = policy->forward(batch).sum();
      loss.backward();
      optimizer.step();
    }
  }
}

// Rollouts of a fixed length: every rank makes as many updates, each over
// its own episodes (drawn per rank): nothing to report.
void train_fixed_rollouts(torch::nn::Linear& policy, torch::optim::Optimizer& optimizer) {
  Walk env;
  for (int episode = 0; episode < 100; ++episode) {
    std::vector<torch::Tensor> observations;
    auto obs = env.reset();
    for (int t = 0; t < 64; ++t) {
      int64_t action = torch::multinomial(torch::softmax(policy->forward(obs), 0), 1).item<int64_t>();
      if (env.step(action, obs)) obs = env.reset();
      observations.push_back(obs);
    }
    for (size_t i = 0; i < observations.size(); i += 8) {
      auto batch = torch::stack(std::vector<torch::Tensor>(observations.begin() + i,
                                                           observations.begin() + std::min(i + 8, observations.size())));
      auto loss = policy->forward(batch).sum();
      loss.backward();
      optimizer.step();
    }
  }
}

int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  torch::Tensor x = torch::randn({256, 4}), y = torch::randn({256, 1});
  for (int epoch = 0; epoch < 3; ++epoch) {
    BatchIterator batches(x, y, 32);
    // CHECK: fabric-own-dataloader.cpp:[[@LINE+1]]:5: warning: this training loop's data is not split across ranks: it reads its batches from `BatchIterator`, a class of the project's own whose code the tool does not see here{{.*}}fabric::shard{{.*}}[fabric-own-dataloader]
    while (batches.has_next()) {
      auto [xb, yb] = batches.next();
      auto loss = torch::mse_loss(model->forward(xb), yb);
      loss.backward();
      optimizer.step();
    }
  }
  // Index slices of a tensor: sharded (fabric-shard-index-loop), nothing to report.
  for (int64_t i = 0; i < 256; i += 32) {
    auto loss = torch::mse_loss(model->forward(x.slice(0, i, i + 32)), y.slice(0, i, i + 32));
    loss.backward();
    optimizer.step();
  }
  // Full-batch training: every step reads all of x.
  // CHECK: fabric-own-dataloader.cpp:[[@LINE+1]]:3: warning: this training loop's data is not split across ranks: every step reads all of `x` (full-batch training){{.*}}x.index_select(0, fabric.shard(torch::arange(x.size(0)))){{.*}}[fabric-own-dataloader]
  for (int step = 0; step < 100; ++step) {
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
  }
  // The batch index also decides when to step: not sharded, reported.
  // CHECK: fabric-own-dataloader.cpp:[[@LINE+1]]:3: warning: this training loop's data is not split across ranks: the counter decides what the loop does (`if (b % 2 == 1)`){{.*}}[fabric-own-dataloader]
  for (int64_t b = 0; b < 8; ++b) {
    auto loss = torch::mse_loss(model->forward(x.narrow(0, b * 32, 32)), y.narrow(0, b * 32, 32));
    loss.backward();
    if (b % 2 == 1) optimizer.step();
  }
  // Exploration from rand(), seeded nowhere the tool sees.
  // CHECK: fabric-own-dataloader.cpp:[[@LINE+1]]:3: warning: this training loop's data is not split across ranks: it draws its data from rand, seeded alike on every rank{{.*}}std::srand(seed + fabric.global_rank()){{.*}}[fabric-own-dataloader]
  for (int step = 0; step < 10; ++step) {
    auto input = x.slice(0, 0, 1) * static_cast<double>(std::rand() % 3);
    auto loss = torch::mse_loss(model->forward(input), y.slice(0, 0, 1));
    loss.backward();
    optimizer.step();
  }
  StepLoader steps(256, 4);
  torch::Tensor batch;
  steps.reset();
  // CHECK: fabric-own-dataloader.cpp:[[@LINE+1]]:3: warning: this training loop's data is not split across ranks: it reads its batches from `StepLoader`, a loader class of the project's own, which measures its epoch with `steps_`{{.*}}[fabric-own-dataloader]
  while (steps.next(batch)) {
    auto loss = torch::mse_loss(model->forward(x.index_select(0, batch)), y.index_select(0, batch));
    loss.backward();
    optimizer.step();
  }
  // A torch::data loader (the Fabric's after migration), with micro-batches
  // inside: nothing to report.
  auto loader = torch::data::make_data_loader(Points().map(torch::data::transforms::Stack<>()), 64);
  for (auto& batch : *loader) {
    for (int micro = 0; micro < 2; ++micro) {
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      loss.backward();
    }
    optimizer.step();
  }
  // A max_steps trainer reading the loader through its iterator, restarted
  // at the end of each epoch: nothing to report.
  auto it = loader->begin();
  for (int step = 0; step < 1000; ++step) {
    if (!(it != loader->end())) it = loader->begin();
    auto& batch = *it;
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
    loss.backward();
    optimizer.step();
    ++it;
  }
  Trainer trainer{model, &optimizer};
  trainer.epoch(*loader);
  std::vector<torch::data::Example<>> own{{x, y}};
  fit_all(model, optimizer, own);
  // The same through a helper that hands out the next batch.
  for (int step = 0; step < 1000; ++step) {
    auto batch = next_batch();
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
    loss.backward();
    optimizer.step();
  }
  train_summed(model, optimizer, x, y);
  train_drop_last(model, optimizer, x, y);
  train_while(model, optimizer, x, y);
  train_through_lambda(model, optimizer, x, y);
  train_counted(model, optimizer, x);
  train_rollouts(model, optimizer);
  train_fixed_rollouts(model, optimizer);
  return 0;
}
