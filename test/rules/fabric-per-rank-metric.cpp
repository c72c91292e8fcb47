// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.err --implicit-check-not='[fabric-per-rank-metric]'
#include <torch/torch.h>

#include <numeric>
#include <vector>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t index) override;
  c10::optional<size_t> size() const override;
};

// A meter of the project's own.
class RunningMean {
 public:
  void update(double value, int64_t weight = 1);
  double mean() const;
};

int main() {
  torch::nn::Linear model(4, 1);
  auto loader = torch::data::make_data_loader(Points().map(torch::data::transforms::Stack<>()), 64);
  for (int epoch = 0; epoch < 3; ++epoch) {
    RunningMean meter;
    std::vector<double> losses;
    // CHECK: fabric-per-rank-metric.cpp:[[@LINE+1]]:5: warning: this loop sees one rank's shard of the data, and `meter` (RunningMean), `losses` (std::vector<double>) collect its values and are read after it{{.*}}[fabric-per-rank-metric]
    for (auto& batch : *loader) {
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      meter.update(loss.item<double>(), batch.data.size(0));
      losses.push_back(loss.item<double>());
    }
    std::cout << "epoch " << epoch << " loss " << meter.mean() << " "
              << std::accumulate(losses.begin(), losses.end(), 0.0) / losses.size() << std::endl;
  }
  // Kept across epochs (a history), or never read after the loop: not reported.
  std::vector<double> history;
  for (int epoch = 0; epoch < 3; ++epoch) {
    RunningMean unread;
    for (auto& batch : *loader) {
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      history.push_back(loss.item<double>());
      unread.update(loss.item<double>());
    }
  }
  std::cout << "history " << history.size() << std::endl;
  return 0;
}
