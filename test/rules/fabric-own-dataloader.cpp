// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.err --implicit-check-not='[fabric-own-dataloader]'
#include <torch/torch.h>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t index) override;
  c10::optional<size_t> size() const override;
};

// The project's own batching: every rank would read all of it.
class BatchIterator {
 public:
  BatchIterator(torch::Tensor x, torch::Tensor y, int64_t batch);
  bool has_next() const;
  std::pair<torch::Tensor, torch::Tensor> next();
};

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
  return 0;
}
