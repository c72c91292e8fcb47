#pragma once

#include <torch/torch.h>

#include <iomanip>
#include <iostream>

struct TrainerOptions {
  int epochs = 6;
  double lr = 3e-3;
  double weight_decay = 0.0;
  bool verbose = true;
};

// Generic regression trainer. Model needs parameters(), forward(x), train()
// and eval(); the trainer does not own it.
template <class Model>
class Trainer {
 public:
  Trainer(Model* model, torch::Device device, TrainerOptions options = {})
      : model_(model), device_(device), options_(options) {}

  template <class Loader>
  void train(Loader& loader) {
    torch::optim::Adam optimizer(model_->parameters(),
                                 torch::optim::AdamOptions(options_.lr).weight_decay(options_.weight_decay));
    for (int epoch = 1; epoch <= options_.epochs; ++epoch) {
      model_->train();
      double total = 0.0;
      int64_t steps = 0;
      for (auto& batch : loader) {
        auto inputs = batch.data.to(device_);
        auto targets = batch.target.to(device_);
        optimizer.zero_grad();
        torch::Tensor prediction = model_->forward(inputs);
        torch::Tensor loss = torch::mse_loss(prediction, targets);
        loss.backward();
        optimizer.step();
        total += loss.item<double>();
        ++steps;
      }
      last_loss_ = total / steps;
      if (options_.verbose) {
        std::cout << "epoch " << epoch << " loss " << std::fixed << std::setprecision(4) << last_loss_
                  << std::endl;
      }
    }
  }

  // Mean squared error over the whole loader.
  template <class Loader>
  double evaluate(Loader& loader) {
    torch::NoGradGuard no_grad;
    model_->eval();
    double sum = 0.0;
    int64_t count = 0;
    for (auto& batch : loader) {
      auto inputs = batch.data.to(device_);
      auto targets = batch.target.to(device_);
      torch::Tensor prediction = model_->forward(inputs);
      sum += torch::mse_loss(prediction, targets, torch::Reduction::Sum).template item<double>();
      count += targets.size(0);
    }
    return sum / count;
  }

  double last_loss() const { return last_loss_; }

 private:
  Model* model_;
  torch::Device device_;
  TrainerOptions options_;
  double last_loss_ = 0.0;
};
