// A classifier trainer that keeps its validation figures in members:
// evaluate() resets and sums them per batch, fit() turns them into the
// epoch's line, divided by the holdout's size (the way research trainers
// keep `metrics_acc_`-style members between evaluate() and fit()).
#include <torch/torch.h>

#include <iostream>

class Blobs : public torch::data::datasets::Dataset<Blobs> {
 public:
  explicit Blobs(int64_t count) {
    labels_ = torch::arange(count) % 3;
    auto centers = torch::tensor({{0.0f, 2.0f}, {-1.8f, -1.0f}, {1.8f, -1.0f}});
    points_ = centers.index_select(0, labels_) + 0.9 * torch::randn({count, 2});
  }
  torch::data::Example<> get(size_t index) override { return {points_[index], labels_[index]}; }
  torch::optional<size_t> size() const override { return labels_.size(0); }

 private:
  torch::Tensor points_, labels_;
};

struct ClassifierImpl : torch::nn::Module {
  ClassifierImpl()
      : hidden(register_module("hidden", torch::nn::Linear(2, 32))),
        out(register_module("out", torch::nn::Linear(32, 3))) {}
  torch::Tensor forward(const torch::Tensor& x) { return out(torch::relu(hidden(x))); }
  torch::nn::Linear hidden, out;
};
TORCH_MODULE(Classifier);

class Trainer {
 public:
  explicit Trainer(int64_t holdout_size)
      : holdout_size_(holdout_size), optimizer_(model_->parameters(), torch::optim::AdamOptions(1e-2)) {}

  template <class Loader>
  double train_epoch(Loader& loader) {
    model_->train();
    double total = 0;
    int64_t batches = 0;
    for (auto& batch : loader) {
      optimizer_.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(model_->forward(batch.data), batch.target);
      loss.backward();
      optimizer_.step();
      total += loss.template item<double>();
      ++batches;
    }
    return total / batches;
  }

  template <class Loader>
  void evaluate(Loader& loader) {
    torch::NoGradGuard no_grad;
    model_->eval();
    loss_sum_ = 0;
    correct_ = 0;
    class_correct_ = torch::zeros({3});
    for (auto& batch : loader) {
      auto logits = model_->forward(batch.data);
      loss_sum_ += torch::nn::functional::cross_entropy(
                       logits, batch.target, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                       .template item<double>();
      auto hits = logits.argmax(1).eq(batch.target);
      correct_ += hits.sum().template item<int64_t>();
      class_correct_ += torch::one_hot(batch.target, 3).mul(hits.unsqueeze(1)).sum(0);
    }
  }

  template <class TrainLoader, class TestLoader>
  void fit(TrainLoader& train, TestLoader& test, int epochs) {
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      double loss = train_epoch(train);
      evaluate(test);
      std::cout << "epoch " << epoch << " loss " << loss << " val_loss " << loss_sum_ / holdout_size_ << " val_acc "
                << static_cast<double>(correct_) / holdout_size_ << " val_acc_first_class "
                << class_correct_[0].item<double>() * 3 / holdout_size_ << std::endl;
    }
  }

 private:
  int64_t holdout_size_;
  Classifier model_;
  torch::optim::Adam optimizer_;
  double loss_sum_ = 0;
  int64_t correct_ = 0;
  torch::Tensor class_correct_;
};

int main() {
  torch::manual_seed(5);
  Blobs holdout(600);
  const int64_t holdout_size = static_cast<int64_t>(*holdout.size());
  auto train = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Blobs(1800).map(torch::data::transforms::Stack<>()), torch::data::DataLoaderOptions(32));
  auto test = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(holdout).map(torch::data::transforms::Stack<>()), torch::data::DataLoaderOptions(100));
  Trainer trainer(holdout_size);
  trainer.fit(*train, *test, 6);
  return 0;
}
