// What people go distributed for, in one ordinary single-device program
// (issue 27): dropout, SGD with momentum, a StepLR schedule, gradient
// accumulation over 4 micro-batches, a plateau rule that halves the
// learning rate through param_groups() when the test loss stalls, and an
// evaluation over 1001 test samples (which no rank count divides).
// `fabricize verify` migrates it and checks the migrated program against
// this one on 1 and 2 processes.
#include <torch/torch.h>

#include <cstdio>
#include <iostream>

struct Blobs : torch::data::datasets::Dataset<Blobs> {
  Blobs(int64_t count, const torch::Tensor& centers) {
    labels = torch::randint(0, centers.size(0), {count}, torch::kLong);
    inputs = centers.index_select(0, labels) + torch::randn({count, centers.size(1)});
    // About 10% of the labels are wrong: accuracy plateaus near 0.9.
    auto flip = torch::rand({count}) < 0.1;
    labels = torch::where(flip, torch::randint(0, centers.size(0), {count}, torch::kLong), labels);
  }
  torch::data::Example<> get(size_t index) override { return {inputs[index], labels[index]}; }
  torch::optional<size_t> size() const override { return static_cast<size_t>(labels.size(0)); }
  torch::Tensor inputs, labels;
};

struct ClassifierImpl : torch::nn::Module {
  ClassifierImpl() {
    hidden = register_module("hidden", torch::nn::Linear(16, 64));
    dropout = register_module("dropout", torch::nn::Dropout(0.2));
    out = register_module("out", torch::nn::Linear(64, 4));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = dropout(torch::relu(hidden(x)));
    return torch::log_softmax(out(x), 1);
  }
  torch::nn::Linear hidden{nullptr}, out{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(Classifier);

int main() {
  torch::manual_seed(7);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  auto centers = 2.0 * torch::randn({4, 16});
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Blobs(2048, centers).map(torch::data::transforms::Stack<>()), 32);
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Blobs(1001, centers).map(torch::data::transforms::Stack<>()), 100);

  Classifier model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/3, /*gamma=*/0.5);
  const int accumulate = 4;
  int batches = 0;
  double best = 1e9;
  int stalled = 0;
  double test_loss = 0, accuracy = 0;

  for (int epoch = 1; epoch <= 8; ++epoch) {
    model->train();
    double total = 0;
    int count = 0;
    for (auto& batch : *train_loader) {
      auto data = batch.data.to(device), target = batch.target.to(device);
      auto loss = torch::nll_loss(model->forward(data), target);
      (loss / accumulate).backward();
      if (++batches % accumulate == 0) {
        optimizer.step();
        optimizer.zero_grad();
      }
      total += loss.item<double>();
      ++count;
    }
    scheduler.step();

    model->eval();
    torch::NoGradGuard no_grad;
    double summed_loss = 0;
    int64_t correct = 0, seen = 0;
    for (auto& batch : *test_loader) {
      auto data = batch.data.to(device), target = batch.target.to(device);
      auto output = model->forward(data);
      summed_loss += torch::nll_loss(output, target, {}, torch::Reduction::Sum).item<double>();
      correct += output.argmax(1).eq(target).sum().item<int64_t>();
      seen += target.size(0);
    }
    test_loss = summed_loss / seen;
    accuracy = static_cast<double>(correct) / seen;
    // A plateau rule written by hand, fed the test loss.
    if (test_loss < best - 1e-3) {
      best = test_loss;
      stalled = 0;
    } else if (++stalled >= 2) {
      for (auto& group : optimizer.param_groups()) {
        auto& options = static_cast<torch::optim::SGDOptions&>(group.options());
        options.lr(options.lr() * 0.5);
      }
      stalled = 0;
    }
    const double lr = static_cast<torch::optim::SGDOptions&>(optimizer.param_groups()[0].options()).lr();
    std::printf("epoch %d loss %.4f test loss %.4f acc %.4f seen %lld lr %.5f\n", epoch, total / count, test_loss,
                accuracy, static_cast<long long>(seen), lr);
  }
  std::cout << "test loss " << test_loss << " acc " << accuracy << std::endl;
  return 0;
}
