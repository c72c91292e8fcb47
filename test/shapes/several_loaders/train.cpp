// Train / validation / test split, each with its own data loader: the model
// is validated after every epoch and tested once at the end.
#include <torch/torch.h>

#include <cstdio>
#include <string>

namespace data = torch::data;

// Three classes: which of three directions in 4-D a point mostly points to;
// a tenth of the labels are random.
class DirectionData : public data::datasets::Dataset<DirectionData> {
 public:
  DirectionData(const torch::Tensor& directions, int64_t n) {
    features_ = torch::randn({n, 4});
    labels_ = features_.matmul(directions.t()).argmax(1);
    auto noise = torch::rand({n}) < 0.1;
    labels_ = torch::where(noise, torch::randint(3, {n}, torch::kLong), labels_);
  }
  data::Example<> get(size_t i) override { return {features_[i], labels_[i]}; }
  torch::optional<size_t> size() const override { return labels_.size(0); }

 private:
  torch::Tensor features_, labels_;
};

struct Net : torch::nn::Module {
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(4, 32));
    fc2 = register_module("fc2", torch::nn::Linear(32, 3));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2->forward(torch::relu(fc1->forward(x))); }
};

// Sums loss * batch size and the number of hits, divides by the set's size.
template <typename Loader>
std::pair<double, double> evaluate(Net& model, Loader& loader, size_t set_size,
                                   torch::Device device) {
  torch::NoGradGuard no_grad;
  model.eval();
  double loss_sum = 0;
  int64_t correct = 0;
  for (auto& batch : loader) {
    auto x = batch.data.to(device), y = batch.target.to(device);
    auto logits = model.forward(x);
    loss_sum += torch::cross_entropy_loss(logits, y).template item<double>() * x.size(0);
    correct += logits.argmax(1).eq(y).sum().template item<int64_t>();
  }
  model.train();
  return {loss_sum / set_size, static_cast<double>(correct) / set_size};
}

int main() {
  torch::manual_seed(4);
  const auto device = torch::cuda::is_available() ? torch::Device("cuda") : torch::Device("cpu");

  auto directions = torch::randn({3, 4});
  auto train_set = DirectionData(directions, 1024).map(data::transforms::Stack<>());
  auto val_set = DirectionData(directions, 256).map(data::transforms::Stack<>());
  auto test_set = DirectionData(directions, 256).map(data::transforms::Stack<>());
  const size_t val_size = val_set.size().value();
  const size_t test_size = test_set.size().value();

  auto train_loader = data::make_data_loader<data::samplers::RandomSampler>(
      std::move(train_set), data::DataLoaderOptions().batch_size(32));
  auto val_loader = data::make_data_loader<data::samplers::SequentialSampler>(
      std::move(val_set), data::DataLoaderOptions().batch_size(64));
  auto test_loader = data::make_data_loader<data::samplers::SequentialSampler>(
      std::move(test_set), data::DataLoaderOptions().batch_size(64));

  Net model;
  model.to(device);
  torch::optim::Adam optimizer(model.parameters(), torch::optim::AdamOptions(5e-3));

  for (int epoch = 1; epoch <= 12; ++epoch) {
    double train_loss = 0;
    int batches = 0;
    for (auto& batch : *train_loader) {
      auto x = batch.data.to(device), y = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::cross_entropy_loss(model.forward(x), y);
      loss.backward();
      optimizer.step();
      train_loss += loss.item<double>();
      ++batches;
    }
    auto [val_loss, val_acc] = evaluate(model, *val_loader, val_size, device);
    std::printf("epoch %d loss %.4f val_loss %.4f val_acc %.3f\n", epoch, train_loss / batches,
                val_loss, val_acc);
  }

  auto [test_loss, test_acc] = evaluate(model, *test_loader, test_size, device);
  std::printf("test loss %.4f acc %.3f\n", test_loss, test_acc);
  return 0;
}
