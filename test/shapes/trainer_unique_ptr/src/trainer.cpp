#include "trainer.h"

#include <iomanip>
#include <iostream>

Trainer::Trainer(const Config& config)
    : config_(config),
      device_(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU),
      model_(config.hidden, 3),
      train_set_(config.train_size),
      test_set_(config.test_size),
      log_(config.log_file) {
  model_->to(device_);
  optimizer_ = std::make_unique<torch::optim::Adam>(
      model_->parameters(), torch::optim::AdamOptions(config_.learning_rate));
  log_ << "epoch,loss,test_loss,test_acc\n";
}

float Trainer::train_step(const Batch& batch) {
  auto inputs = batch.data.to(device_);
  auto labels = batch.target.to(device_);

  optimizer_->zero_grad();
  auto loss = torch::nn::functional::cross_entropy(model_->forward(inputs), labels);
  loss.backward();
  optimizer_->step();
  return loss.item<float>();
}

void Trainer::fit(int epochs) {
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      train_set_.map(torch::data::transforms::Stack<>()), config_.batch_size);

  for (int epoch = 1; epoch <= epochs; ++epoch) {
    model_->train();
    float total = 0;
    int batches = 0;
    for (auto& batch : *loader) {
      total += train_step(batch);
      ++batches;
    }
    const float epoch_loss = total / batches;
    const EvalResult eval = evaluate();

    std::cout << "epoch " << epoch << " loss " << std::fixed << std::setprecision(4) << epoch_loss
              << std::endl;
    log_ << epoch << ',' << epoch_loss << ',' << eval.loss << ',' << eval.accuracy << std::endl;
    torch::save(model_, config_.checkpoint);
  }
}

EvalResult Trainer::evaluate() {
  torch::NoGradGuard no_grad;
  model_->eval();
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      test_set_.map(torch::data::transforms::Stack<>()), 128);
  double loss = 0;
  int64_t correct = 0;
  for (auto& batch : *loader) {
    auto inputs = batch.data.to(device_);
    auto labels = batch.target.to(device_);
    auto logits = model_->forward(inputs);
    loss += torch::nn::functional::cross_entropy(
                logits, labels,
                torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                .item<double>();
    correct += logits.argmax(1).eq(labels).sum().item<int64_t>();
  }
  const auto n = static_cast<double>(*test_set_.size());
  return {loss / n, correct / n};
}
