#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <cstdio>

#include "models.h"

namespace F = torch::nn::functional;

struct ClassifierMetrics {
  double loss = 0.0;
  double accuracy = 0.0;
};

// Owns its network and its optimizer: `Classifier clf; clf.fit(loader);`.
class Classifier {
 public:
  Classifier();

  template <class Loader>
  void fit(Loader& loader) {
    for (int epoch = 1; epoch <= epochs_; ++epoch) {
      net_->train();
      double loss_sum = 0.0;
      int64_t correct = 0, seen = 0, batches = 0;
      for (auto& batch : loader) {
        auto x = batch.data.to(device_);
        auto y = batch.target.to(device_);
        optimizer_.zero_grad();
        auto logits = net_->forward(x);
        auto loss = F::cross_entropy(logits, y);
        loss.backward();
        optimizer_.step();
        loss_sum += loss.template item<double>();
        correct += logits.argmax(1).eq(y).sum().template item<int64_t>();
        seen += y.size(0);
        ++batches;
      }
      std::printf("classifier epoch %d loss %.4f acc %.4f\n", epoch, loss_sum / batches,
                  static_cast<double>(correct) / seen);
    }
  }

  template <class Loader>
  ClassifierMetrics evaluate(Loader& loader) {
    torch::NoGradGuard no_grad;
    net_->eval();
    double loss_sum = 0.0;
    int64_t correct = 0, seen = 0;
    for (auto& batch : loader) {
      auto x = batch.data.to(device_);
      auto y = batch.target.to(device_);
      auto logits = net_->forward(x);
      loss_sum += F::cross_entropy(logits, y, F::CrossEntropyFuncOptions().reduction(torch::kSum)).template item<double>();
      correct += logits.argmax(1).eq(y).sum().template item<int64_t>();
      seen += y.size(0);
    }
    return {loss_sum / seen, static_cast<double>(correct) / seen};
  }

 private:
  torch::Device device_;
  SpiralNet net_;
  torch::optim::SGD optimizer_;
  int epochs_ = 8;
};
