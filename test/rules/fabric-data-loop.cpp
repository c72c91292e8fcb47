// The migration report's "Data sharded" section: one line per training
// loop, where its batches come from after the migration, and the counts.
// RUN: %fabricize %s -o %t.out --report %t.json --report %t.md -- %flags 2> /dev/null; test $? -eq 1
// RUN: FileCheck %s --check-prefix=JSON --input-file=%t.json
// RUN: FileCheck %s --check-prefix=MD --input-file=%t.md
// No note is a finding: lint reports only the loop that needs a person.
// RUN: %lint %s -- %flags > %t.lint; test $? -eq 1
// RUN: FileCheck %s --check-prefix=LINT --input-file=%t.lint --implicit-check-not='[fabric-data-loop]'
//
// JSON: "data_loops": [
// JSON-NEXT: {
// JSON-NEXT: "file": "fabric-data-loop.cpp",
// JSON-NEXT: "line": 59,
// JSON-NEXT: "status": "sharded",
// JSON-NEXT: "text": "its batches come from a loader the Fabric sets up (a distributed sampler)"
// JSON: "line": 64,
// JSON-NEXT: "status": "sharded",
// JSON-NEXT: "text": "each rank takes its positions (fabric.shard_range)"
// The loop over batches around the micro-batch loop is the data loop.
// JSON: "line": 69,
// JSON-NEXT: "status": "sharded",
// JSON-NEXT: "text": "each rank takes its positions (fabric.shard_range)"
// JSON: "line": 77,
// JSON-NEXT: "status": "drawn_per_rank",
// JSON: "line": 83,
// JSON-NEXT: "status": "needs_a_person",
// JSON-NEXT: "text": "every step reads all of `X` (full-batch training)
// JSON: "training_loops": {
// JSON-NEXT: "drawn_per_rank": 1,
// JSON-NEXT: "needs_a_person": 1,
// JSON-NEXT: "not_a_data_loop": 0,
// JSON-NEXT: "sharded": 3,
// JSON-NEXT: "total": 5
//
// MD: 5 training loops: data sharded 4 (3 split, 1 drawn per rank), needs a person 1, not a data loop 0.
// MD: ## Data sharded
// MD: | training loop | data sharded | how |
// MD: | fabric-data-loop.cpp:59 | sharded automatically | its batches come from a loader the Fabric sets up
// MD: | fabric-data-loop.cpp:83 | needs a person | every step reads all of `X` (full-batch training){{.*}}(fabric-own-dataloader) |
//
// LINT: fabric-data-loop.cpp:83:3: warning: this training loop's data is not split across ranks{{.*}}[fabric-own-dataloader]
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t index) override;
  c10::optional<size_t> size() const override;
};

int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  torch::Tensor X = torch::randn({512, 4}), Y = torch::randn({512, 1});
  auto loader = torch::data::make_data_loader(Points().map(torch::data::transforms::Stack<>()), 64);
  for (auto& batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
    loss.backward();
    optimizer.step();
  }
  for (int64_t i = 0; i < 512; i += 64) {
    auto loss = torch::mse_loss(model->forward(X.slice(0, i, i + 64)), Y.slice(0, i, i + 64));
    loss.backward();
    optimizer.step();
  }
  for (int64_t i = 0; i < 512; i += 64) {
    auto x = X.slice(0, i, i + 64);
    for (int micro = 0; micro < 2; ++micro) {
      auto loss = torch::mse_loss(model->forward(x), Y.slice(0, i, i + 64));
      loss.backward();
    }
    optimizer.step();
  }
  for (int step = 0; step < 100; ++step) {
    auto x = torch::randn({32, 4});
    auto loss = torch::mse_loss(model->forward(x), x.sum());
    loss.backward();
    optimizer.step();
  }
  for (int step = 0; step < 100; ++step) {
    auto loss = torch::mse_loss(model->forward(X), Y);
    loss.backward();
    optimizer.step();
  }
  return 0;
}
