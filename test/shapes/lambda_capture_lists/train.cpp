// Training written in lambdas with explicit capture lists, as code that
// hands steps to a scheduler does: a Trainer (constructed as `Trainer
// trainer;`) whose epoch runs in a `[this, &loader, ...]` lambda,
// with a `[epoch, &sum, &batches]` lambda nested in it that calls a helper
// that prints, and a free evaluation function whose `[&model, &sum, &count]`
// lambda sums the test loss (issue 39: what the migration adds to a lambda's
// body, the lambda must capture).
#include <torch/torch.h>

#include <functional>
#include <iostream>

namespace data = torch::data;

// y = x . w + 0.5 + noise.
class Regression : public data::datasets::Dataset<Regression> {
 public:
  Regression(const torch::Tensor& w, int64_t n) {
    x_ = torch::randn({n, w.size(0)});
    y_ = torch::matmul(x_, w).unsqueeze(1) + 0.5 + 0.3 * torch::randn({n, 1});
  }
  data::Example<> get(size_t i) override { return {x_[i], y_[i]}; }
  torch::optional<size_t> size() const override { return x_.size(0); }

 private:
  torch::Tensor x_, y_;
};

void loss_display(int epoch, double loss) { std::cout << "epoch " << epoch << " loss " << loss << std::endl; }

void for_each_batch(const std::function<void()>& body, int times) {
  for (int i = 0; i < times; ++i) body();
}

struct Trainer {
  torch::nn::Linear model;
  torch::optim::Adam optimizer;

  Trainer() : model(6, 1), optimizer(model->parameters(), torch::optim::AdamOptions(0.1)) {}

  template <class Loader>
  void fit(Loader& loader, int epochs) {
    torch::Device device(torch::kCPU);
    model->to(device);
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      double sum = 0;
      int batches = 0;
      auto run_epoch = [this, &loader, &sum, &batches, device, epoch]() {
        for (auto& batch : loader) {
          auto inputs = batch.data.to(device);
          auto targets = batch.target.to(device);
          optimizer.zero_grad();
          auto loss = torch::mse_loss(model->forward(inputs), targets);
          loss.backward();
          optimizer.step();
          sum += loss.template item<double>();
          ++batches;
        }
        auto show = [epoch, &sum, &batches]() { loss_display(epoch, sum / batches); };
        show();
      };
      for_each_batch(run_epoch, 1);
    }
  }
};

template <class Loader>
double evaluate(torch::nn::Linear& model, Loader& loader) {
  torch::NoGradGuard no_grad;
  double sum = 0;
  int64_t count = 0;
  auto accumulate = [&model, &sum, &count](const torch::Tensor& inputs, const torch::Tensor& targets) {
    sum += torch::mse_loss(model->forward(inputs), targets, torch::Reduction::Sum).template item<double>();
    count += inputs.size(0);
  };
  for (auto& batch : loader) accumulate(batch.data, batch.target);
  return sum / count;
}

int main() {
  torch::manual_seed(39);
  auto w = torch::randn({6});
  auto train_loader = data::make_data_loader<data::samplers::RandomSampler>(
      Regression(w, 1024).map(data::transforms::Stack<>()), 64);
  auto test_loader = data::make_data_loader<data::samplers::SequentialSampler>(
      Regression(w, 256).map(data::transforms::Stack<>()), 64);
  Trainer trainer;
  trainer.fit(*train_loader, 10);
  std::cout << "test loss " << evaluate(trainer.model, *test_loader) << std::endl;
  return 0;
}
