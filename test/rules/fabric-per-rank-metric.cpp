// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.err --implicit-check-not='[fabric-per-rank-metric]'
#include <torch/torch.h>

#include <algorithm>
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

// Predictions collected by a loop over positions the migration splits:
// each rank's vector holds its share of them.
std::vector<float> predict(torch::nn::Linear& model, const torch::Tensor& x) {
  torch::NoGradGuard no_grad;
  std::vector<float> predictions;
  double total = 0;
  // CHECK: fabric-per-rank-metric.cpp:[[@LINE+1]]:3: warning: this loop sees one rank's shard of the data, and `predictions` (std::vector<float>) collect its values{{.*}}[fabric-per-rank-metric]
  for (int64_t i = 0; i < x.size(0); ++i) {
    auto out = model->forward(x[i]);
    predictions.push_back(out.item<float>());
    total += out.item<double>();
  }
  std::cout << total << std::endl;
  return predictions;
}

// A training loop over batches made before it, its losses kept in a vector
// read after it.
void train_batches(torch::nn::Linear& model, torch::optim::Optimizer& optimizer,
                   const std::vector<std::pair<torch::Tensor, torch::Tensor>>& batches) {
  std::vector<double> losses;
  // CHECK: fabric-per-rank-metric.cpp:[[@LINE+1]]:3: warning: this loop sees one rank's shard of the data, and `losses` (std::vector<double>) collect its values{{.*}}[fabric-per-rank-metric]
  for (const auto& [x, y] : batches) {
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item<double>());
  }
  std::cout << std::accumulate(losses.begin(), losses.end(), 0.0) / losses.size() << std::endl;
}

// The loader the loop reads (a class of the project's own, sharded where it
// is defined) is changed by `next()` and read after the loop by `size()`:
// it is no tally, nothing to report (the plain sum is all-reduced).
class Rows {
 public:
  explicit Rows(torch::Tensor x) : x_(x), order_(static_cast<size_t>(x.size(0))) {
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
  }
  bool has_next() const { return pos_ < order_.size(); }
  torch::Tensor next() {
    size_t end = std::min(pos_ + 8, order_.size());
    std::vector<int64_t> rows(order_.begin() + pos_, order_.begin() + end);
    pos_ = end;
    return x_.index_select(0, torch::tensor(rows));
  }
  size_t size() const { return order_.size(); }

 private:
  torch::Tensor x_;
  std::vector<size_t> order_;
  size_t pos_ = 0;
};

double test_loss(torch::nn::Linear& model, const torch::Tensor& x) {
  torch::NoGradGuard no_grad;
  Rows rows(x);
  double sum = 0;
  while (rows.has_next()) sum += model->forward(rows.next()).pow(2).sum().item<double>();
  return sum / rows.size();
}

// A trainer's members fed per batch in one member function and read in
// another: a meter member and a running total it never resets are
// reported (no reduce after the loop can make them whole); a timer ticked
// without a value and a count of evaluations are every rank's alike: not.
class Timer {
 public:
  void tick();
  double elapsed() const;
};
class Trainer {
 public:
  explicit Trainer(torch::nn::Linear model) : model_(model), optimizer_(model_->parameters(), 0.1) {}
  template <class Loader>
  void evaluate(Loader& loader) {
    torch::NoGradGuard no_grad;
    // CHECK: fabric-per-rank-metric.cpp:[[@LINE+1]]:5: warning: this loop sees one rank's shard of the data, and `meter_` (a member, RunningMean), `loss_total_` (a member, double) collect its values and are read after it{{.*}}reset it before the loop{{.*}}[fabric-per-rank-metric]
    for (auto& batch : loader) {
      auto loss = torch::mse_loss(model_->forward(batch.data), batch.target);
      meter_.update(loss.template item<double>());
      loss_total_ += loss.template item<double>();
      timer_.tick();
      ++evaluations_;
    }
  }
  void report() const {
    std::cout << meter_.mean() << " " << loss_total_ << " " << timer_.elapsed() << " " << evaluations_ << std::endl;
  }

 private:
  torch::nn::Linear model_;
  torch::optim::SGD optimizer_;
  RunningMean meter_;
  double loss_total_ = 0;
  Timer timer_;
  int64_t evaluations_ = 0;
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
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> batches(8, {torch::randn({16, 4}), torch::randn({16, 1})});
  train_batches(model, optimizer, batches);
  std::cout << predict(model, torch::randn({32, 4})).size() << std::endl;
  std::cout << test_loss(model, torch::randn({32, 4})) << std::endl;
  Trainer trainer(model);
  trainer.evaluate(*loader);
  trainer.report();
  return 0;
}
