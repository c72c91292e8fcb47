#include "train.h"

#include <cstdio>

#include "metrics.h"

void train(Net& model, DataSet& data, const Options& opts) {
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(opts.lr).momentum(opts.momentum));
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      data.map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(opts.batch_size));

  for (int epoch = 1; epoch <= opts.epochs; ++epoch) {
    model->train();
    RunningMean loss_meter;
    RunningMean acc_meter;
    for (auto& batch : *loader) {
      auto x = batch.data.to(opts.device);
      auto y = batch.target.to(opts.device);
      optimizer.zero_grad();
      auto logits = model->forward(x);
      auto loss = torch::cross_entropy_loss(logits, y);
      loss.backward();
      optimizer.step();
      loss_meter.update(loss.item<double>(), x.size(0));
      acc_meter.update(accuracy(logits, y), x.size(0));
    }
    std::printf("epoch %d loss %.4f acc %.3f\n", epoch, loss_meter.mean(), acc_meter.mean());
  }
}

EvalMetrics evaluate(Net& model, DataSet& data, const Options& opts) {
  torch::NoGradGuard no_grad;
  model->eval();
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      data.map(torch::data::transforms::Stack<>()), 128);
  RunningMean loss_meter, acc_meter;
  for (auto& batch : *loader) {
    auto x = batch.data.to(opts.device);
    auto y = batch.target.to(opts.device);
    auto logits = model->forward(x);
    loss_meter.update(torch::cross_entropy_loss(logits, y).item<double>(), x.size(0));
    acc_meter.update(accuracy(logits, y), x.size(0));
  }
  return {loss_meter.mean(), acc_meter.mean()};
}
