#include "experiment.h"

#include "data.h"
#include "trainer.hpp"

Experiment::Experiment(const ExperimentConfig& config)
    : config_(config), device_(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU) {
  encoder_ = new Encoder(8, config_.hidden);
  head_ = new Head(config_.hidden, 1);
  encoder_->to(device_);
  head_->to(device_);
}

Experiment::~Experiment() {
  delete head_;
  delete encoder_;
}

std::vector<torch::Tensor> Experiment::parameters() const {
  std::vector<torch::Tensor> params = encoder_->parameters();
  for (auto& p : head_->parameters()) params.push_back(p);
  return params;
}

torch::Tensor Experiment::forward(torch::Tensor x) { return head_->forward(encoder_->forward(x)); }

void Experiment::train(bool on) {
  encoder_->train(on);
  head_->train(on);
}

double Experiment::run() {
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      data::make_regression(config_.train_size).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(config_.batch_size));
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      data::make_regression(config_.test_size).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(128));

  TrainerOptions options;
  options.epochs = config_.epochs;
  options.lr = config_.lr;
  Trainer<Experiment> trainer(this, device_, options);
  trainer.train(*train_loader);
  return trainer.evaluate(*test_loader);
}
