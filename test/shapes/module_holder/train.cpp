// Four Gaussian blobs in the plane, classified by a two-layer MLP declared the
// usual LibTorch way: a ClassifierImpl plus TORCH_MODULE(Classifier).
#include <torch/torch.h>

#include <iomanip>
#include <iostream>

namespace {

constexpr int64_t kClasses = 4;

class Blobs : public torch::data::datasets::Dataset<Blobs> {
 public:
  Blobs(int64_t n, double label_noise) {
    auto centers = torch::tensor({{-2.0, -2.0}, {2.0, -2.0}, {-2.0, 2.0}, {2.0, 2.0}});
    labels_ = torch::randint(kClasses, {n}, torch::kLong);
    points_ = centers.index_select(0, labels_) + 0.7 * torch::randn({n, 2});
    // mislabel a fraction of the points
    auto noisy = torch::rand({n}) < label_noise;
    labels_.masked_scatter_(noisy, torch::randint(kClasses, {n}, torch::kLong));
  }

  torch::data::Example<> get(size_t i) override { return {points_[i], labels_[i]}; }
  torch::optional<size_t> size() const override { return labels_.size(0); }

 private:
  torch::Tensor points_, labels_;
};

}  // namespace

struct ClassifierImpl : torch::nn::Module {
  ClassifierImpl(int64_t in, int64_t hidden, int64_t out)
      : hidden_(register_module("hidden", torch::nn::Linear(in, hidden))),
        out_(register_module("out", torch::nn::Linear(hidden, out))) {}

  torch::Tensor forward(const torch::Tensor& x) {
    return out_(torch::relu(hidden_(x)));
  }

  torch::nn::Linear hidden_, out_;
};
TORCH_MODULE(Classifier);

int main() {
  torch::manual_seed(7);

  auto train_data = Blobs(2048, 0.1).map(torch::data::transforms::Stack<>());
  auto test_data = Blobs(512, 0.1).map(torch::data::transforms::Stack<>());
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(train_data), torch::data::DataLoaderOptions().batch_size(64));
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(test_data), torch::data::DataLoaderOptions().batch_size(128));

  Classifier model(2, 16, kClasses);
  if (torch::cuda::is_available()) {
    model->to(torch::kCUDA);
  }
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));

  std::cout << std::fixed << std::setprecision(4);
  for (int epoch = 0; epoch < 12; ++epoch) {
    model->train();
    float total_loss = 0;
    int64_t n_batches = 0, hits = 0, seen = 0;
    for (auto& batch : *train_loader) {
      torch::Tensor x = batch.data, y = batch.target;
      if (torch::cuda::is_available()) {
        x = x.cuda();
        y = y.cuda();
      }
      optimizer.zero_grad();
      torch::Tensor logits = model(x);
      torch::Tensor loss = torch::nn::functional::cross_entropy(logits, y);
      loss.backward();
      optimizer.step();

      total_loss += loss.item<float>();
      n_batches += 1;
      hits += logits.argmax(1).eq(y).sum().item<int64_t>();
      seen += y.size(0);
    }
    std::cout << "epoch " << epoch << " loss " << total_loss / n_batches << " acc "
              << static_cast<double>(hits) / seen << '\n';
  }

  model->eval();
  torch::NoGradGuard no_grad;
  float test_loss = 0;
  int64_t batches = 0, hits = 0, seen = 0;
  for (auto& batch : *test_loader) {
    torch::Tensor x = batch.data, y = batch.target;
    if (torch::cuda::is_available()) {
      x = x.cuda();
      y = y.cuda();
    }
    auto logits = model(x);
    test_loss += torch::nn::functional::cross_entropy(logits, y).item<float>();
    hits += logits.argmax(1).eq(y).sum().item<int64_t>();
    seen += y.size(0);
    ++batches;
  }
  std::cout << "test loss " << test_loss / batches << " acc " << static_cast<double>(hits) / seen
            << std::endl;
}
