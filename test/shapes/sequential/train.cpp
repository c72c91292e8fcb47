// A torch::nn::Sequential classifier for three Gaussian clusters in 5-D,
// trained with SGD + Nesterov momentum.
#include <torch/torch.h>

#include <iostream>
#include <utility>

namespace nn = torch::nn;
namespace data = torch::data;
namespace optim = torch::optim;
using torch::Tensor;

// Points around one of three centres; 10% of the labels are re-drawn at random.
class Clusters : public data::datasets::Dataset<Clusters> {
 public:
  Clusters(const Tensor& centers, int64_t n) {
    labels_ = torch::randint(centers.size(0), {n}, torch::kLong);
    points_ = centers.index_select(0, labels_) + torch::randn({n, centers.size(1)});
    auto relabel = torch::rand({n}) < 0.1;
    labels_ = torch::where(relabel, torch::randint(centers.size(0), {n}, torch::kLong), labels_);
  }
  data::Example<> get(size_t i) override { return {points_[i], labels_[i]}; }
  torch::optional<size_t> size() const override { return points_.size(0); }

 private:
  Tensor points_, labels_;
};

int main() {
  torch::manual_seed(11);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  auto centers = 2.0 * torch::randn({3, 5});
  auto train_loader = data::make_data_loader<data::samplers::RandomSampler>(
      Clusters(centers, 1280).map(data::transforms::Stack<>()), 64);
  auto test_loader = data::make_data_loader<data::samplers::SequentialSampler>(
      Clusters(centers, 384).map(data::transforms::Stack<>()), 64);

  nn::Sequential model(
      nn::Linear(5, 32),
      nn::Functional(torch::relu),
      nn::Linear(32, 32),
      nn::Functional(torch::relu),
      nn::Linear(32, 3));
  model->to(device);

  optim::SGD optimizer(model->parameters(),
                       optim::SGDOptions(0.02).momentum(0.9).nesterov(true));

  for (int epoch = 1; epoch <= 10; ++epoch) {
    model->train();
    double loss_sum = 0;
    int steps = 0;
    for (auto& batch : *train_loader) {
      auto inputs = batch.data.to(device);
      auto labels = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = nn::functional::cross_entropy(model->forward(inputs), labels);
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
      ++steps;
    }
    std::cout << "epoch " << epoch << " loss " << loss_sum / steps << std::endl;
  }

  model->eval();
  torch::NoGradGuard no_grad;
  double test_loss = 0;
  int64_t correct = 0, total = 0;
  for (auto& batch : *test_loader) {
    auto inputs = batch.data.to(device);
    auto labels = batch.target.to(device);
    auto logits = model->forward(inputs);
    test_loss += nn::functional::cross_entropy(logits, labels).item<double>() * labels.size(0);
    correct += logits.argmax(1).eq(labels).sum().item<int64_t>();
    total += labels.size(0);
  }
  std::cout << "test loss " << test_loss / total << " acc " << double(correct) / total << std::endl;
  return 0;
}
