// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.err --implicit-check-not='[fabric-divergent-exit]'
// RUN: %migrate %t.cpp -- %flags > %t.again.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t.again.cpp
#include <torch/torch.h>

#include <cmath>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t index) override;
  c10::optional<size_t> size() const override;
};

std::vector<double> misses(const torch::Tensor& prediction);

int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  auto loader = torch::data::make_data_loader(Points().map(torch::data::transforms::Stack<>()), 64);
  double learning_rate = 0.1;
  bool stop = false;
  for (int epoch = 0; epoch < 100 && !stop; ++epoch) {
    double epoch_loss = 0;
    for (auto& batch : *loader) {
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      // This rank's loss: the ranks disagree.
      // CHECK: fabric-divergent-exit.cpp:[[@LINE+1]]:44: warning: this leaves a training loop on a value that differs between ranks (std::isnan(loss.item<double>())){{.*}}[fabric-divergent-exit]
      if (std::isnan(loss.item<double>())) continue;
      loss.backward();
      optimizer.step();
      epoch_loss += loss.item<double>();
      double current = loss.item<double>();
      // CHECK: fabric-divergent-exit.cpp:[[@LINE+1]]:42: warning: this leaves a training loop on a value that differs between ranks (current < 1e-4){{.*}}[fabric-divergent-exit]
      if (current < 1e-4) { stop = true; break; }
    }
    // Summed over the loader, then all-reduced (fabric-reduce-metric): every
    // rank has the same value, nothing to report.
    if (epoch_loss < 0.01) break;
    // Not computed from tensors: the same on every rank.
    if (learning_rate < 1e-6) break;
    learning_rate *= 0.9;
  }
  // A loop whose own condition is this rank's loss.
  torch::Tensor loss = torch::ones({1});
  // CHECK: fabric-divergent-exit.cpp:[[@LINE+1]]:10: warning: this leaves a training loop on a value that differs between ranks (loss.item<double>() > 0.5){{.*}}[fabric-divergent-exit]
  while (loss.item<double>() > 0.5) {
    loss = model->forward(torch::ones({4})).sum();
    loss.backward();
    optimizer.step();
  }
  // Not per rank: a tensor the program read from a file, and shapes (every
  // rank's batches have the same sizes). A loop bound and an exit on them
  // are the same on every rank.
  torch::Tensor ids;
  torch::load(ids, "tokens.pt");
  const int64_t seq_len = 8;
  for (int64_t i = 0; i < ids.size(1) - seq_len; i += seq_len) {
    if (ids[0][i].item<int64_t>() == 0) break;
    auto out = model->forward(ids.slice(1, i, i + seq_len));
    if (out.size(0) == 0) continue;
    loss = out.sum();
    loss.backward();
    optimizer.step();
  }
  for (auto& batch : *loader) {
    if (batch.data.size(0) < 2) break;
    torch::Tensor prediction = model->forward(batch.data);
    prediction.sum().backward();
    optimizer.step();
  }
  // A container made from this rank's predictions has a length of its own:
  // ending on it is per rank.
  for (auto& batch : *loader) {
    torch::Tensor prediction = model->forward(batch.data);
    std::vector<double> missed = misses(prediction);
    // CHECK: fabric-divergent-exit.cpp:[[@LINE+1]]:25: warning: this leaves a training loop on a value that differs between ranks (missed.empty()){{.*}}[fabric-divergent-exit]
    if (missed.empty()) break;
    prediction.sum().backward();
    optimizer.step();
  }
  // A rollout of a fixed length: each rank keeps its own values, as many of
  // them as every other rank; a loop over their count is every rank's alike,
  // and so is an early end on whether it holds any.
  for (int rollout = 0; rollout < 3; ++rollout) {
    std::vector<torch::Tensor> observations;
    auto observation = torch::ones({4});
    for (int t = 0; t < 16; ++t) {
      observation = observation + model->forward(observation).sum();
      observations.push_back(observation);
    }
    if (observations.empty()) break;
    for (size_t i = 0; i < observations.size(); i += 4) {
      model->forward(observations[i]).sum().backward();
      optimizer.step();
    }
  }
  return 0;
}
