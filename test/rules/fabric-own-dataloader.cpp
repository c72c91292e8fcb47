// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.err --implicit-check-not='[fabric-own-dataloader]'
#include <torch/torch.h>
#include <algorithm>
#include <random>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t index) override;
  c10::optional<size_t> size() const override;
};

// A loader class of the project's own: it shuffles its indices in reset(),
// reported there with the change to make; the loop that reads it too.
class IndexLoader {
 public:
  void reset() {
    cursor_ = 0;
    // CHECK: fabric-own-dataloader.cpp:[[@LINE+1]]:5: warning: a data loader of the project's own shuffles its list of indices `indices_` here{{.*}}indices_ = fabric.shard(all_indices);{{.*}}[fabric-own-dataloader]
    std::shuffle(indices_.begin(), indices_.end(), rng_);
  }
  bool operator()(torch::Tensor& batch);

 private:
  std::vector<size_t> indices_;
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
  // CHECK: fabric-own-dataloader.cpp:[[@LINE+1]]:3: warning: this training loop does not read its batches{{.*}}[fabric-own-dataloader]
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

int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  torch::Tensor x = torch::randn({256, 4}), y = torch::randn({256, 1});
  for (int epoch = 0; epoch < 3; ++epoch) {
    BatchIterator batches(x, y, 32);
    // CHECK: fabric-own-dataloader.cpp:[[@LINE+1]]:5: warning: this training loop does not read its batches from a data loader{{.*}}fabric.world_size(){{.*}}[fabric-own-dataloader]
    while (batches.has_next()) {
      auto [xb, yb] = batches.next();
      auto loss = torch::mse_loss(model->forward(xb), yb);
      loss.backward();
      optimizer.step();
    }
  }
  // Index slices of a tensor.
  // CHECK: fabric-own-dataloader.cpp:[[@LINE+1]]:3: warning: this training loop does not read its batches{{.*}}[fabric-own-dataloader]
  for (int64_t i = 0; i < 256; i += 32) {
    auto loss = torch::mse_loss(model->forward(x.slice(0, i, i + 32)), y.slice(0, i, i + 32));
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
  return 0;
}
