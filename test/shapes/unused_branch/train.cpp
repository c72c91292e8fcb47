// Multi-task training with an auxiliary head that only joins every other
// step: a shared trunk, a 3-class classification head (always used) and a
// regression head for an auxiliary target (even steps only).
//
// The data is prepared once and cached as tensors on disk (torch::save);
// the data set reads the cache lazily on its first get().
#include <torch/torch.h>

#include <cstdio>
#include <iostream>
#include <string>

namespace F = torch::nn::functional;

// Moves `t` to wherever `like` lives, so helpers work on any device.
torch::Tensor to_device_of(const torch::Tensor& t, const torch::Tensor& like) { return t.to(like.device()); }

// ---------------------------------------------------------------------------
struct TwoHeadNetImpl : torch::nn::Module {
  TwoHeadNetImpl(int64_t in, int64_t hidden, int64_t classes) : cls_head(nullptr) {
    trunk->push_back(torch::nn::Linear(in, hidden));
    trunk->push_back(torch::nn::ReLU());
    trunk->push_back(torch::nn::Linear(hidden, hidden));
    trunk->push_back(torch::nn::ReLU());
    cls_head = torch::nn::Linear(hidden, classes);
    aux_head->push_back(torch::nn::Linear(hidden, 32));
    aux_head->push_back(torch::nn::Tanh());
    aux_head->push_back(torch::nn::Linear(32, 1));
    register_module("trunk", trunk);
    register_module("cls_head", cls_head);
    register_module("aux_head", aux_head);
  }

  torch::Tensor features(const torch::Tensor& x) { return trunk->forward(x); }
  torch::Tensor classify(const torch::Tensor& h) { return cls_head->forward(h); }
  torch::Tensor regress(const torch::Tensor& h) { return aux_head->forward(h).squeeze(1); }

  torch::nn::Sequential trunk;
  torch::nn::Linear cls_head;
  torch::nn::Sequential aux_head;
};
TORCH_MODULE(TwoHeadNet);

// ---------------------------------------------------------------------------
// Writes <prefix>_x.pt (features) and <prefix>_y.pt (targets: label, aux).
void prepare_split(const std::string& prefix, int64_t n, const torch::Tensor& centers) {
  auto label = torch::randint(0, centers.size(0), {n}, torch::kLong);
  auto x = centers.index_select(0, label) + torch::randn({n, centers.size(1)});
  auto aux = torch::sin(x.select(1, 0)) + 0.5 * x.select(1, 1) - 0.3 * x.select(1, 2).abs() + 0.3 * torch::randn({n});
  auto flip = torch::rand({n}) < 0.1;
  auto noisy_label = torch::where(flip, torch::randint(0, centers.size(0), {n}, torch::kLong), label);
  auto targets = torch::stack({noisy_label.to(torch::kFloat), aux}, 1);
  torch::save(x, prefix + "_x.pt");
  torch::save(targets, prefix + "_y.pt");
}

class CachedSplit : public torch::data::datasets::Dataset<CachedSplit> {
 public:
  CachedSplit(std::string prefix, size_t size) : prefix_(std::move(prefix)), size_(size) {}

  torch::data::Example<> get(size_t index) override {
    if (!features_.defined()) {
      torch::load(features_, prefix_ + "_x.pt");
      torch::load(targets_, prefix_ + "_y.pt");
    }
    return {features_[index], targets_[index]};
  }

  torch::optional<size_t> size() const override { return size_; }

 private:
  std::string prefix_;
  size_t size_;
  torch::Tensor features_, targets_;
};

int main() {
  torch::manual_seed(99);
  torch::Device device = torch::kCPU;
  if (torch::cuda::is_available()) {
    std::cout << "CUDA is available! Training on GPU." << std::endl;
    device = torch::kCUDA;
  }

  const int64_t kTrain = 2048, kTest = 512, kFeatures = 8, kClasses = 3;
  const int64_t batch_size = 32;
  const int epochs = 12;
  const double aux_weight = 1.0;

  auto centers = torch::randn({kClasses, kFeatures}) * 1.2;
  prepare_split("train", kTrain, centers);
  prepare_split("test", kTest, centers);

  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      CachedSplit("train", kTrain).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(batch_size));
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      CachedSplit("test", kTest).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(128));

  TwoHeadNet model(kFeatures, 64, kClasses);
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(2e-3));

  // The classes are not quite balanced after the label noise; mild weights.
  const auto class_weights = torch::tensor({1.0f, 1.1f, 0.9f});

  int64_t step = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    model->train();
    double cls_sum = 0.0, aux_sum = 0.0;
    int64_t batches = 0, aux_batches = 0, correct = 0, seen = 0;
    for (auto& batch : *train_loader) {
      auto x = batch.data.to(device);
      auto y = batch.target.select(1, 0).to(torch::kLong).to(device);
      auto z = batch.target.select(1, 1).to(device);

      optimizer.zero_grad();
      auto h = model->features(x);
      auto logits = model->classify(h);
      auto loss = F::cross_entropy(logits, y, F::CrossEntropyFuncOptions().weight(to_device_of(class_weights, logits)));
      cls_sum += loss.item<double>();
      if (step % 2 == 0) {
        // Auxiliary task on even steps only.
        auto aux_loss = F::mse_loss(model->regress(h), z);
        aux_sum += aux_loss.item<double>();
        ++aux_batches;
        loss = loss + aux_weight * aux_loss;
      }
      loss.backward();
      optimizer.step();
      ++step;
      ++batches;
      correct += logits.argmax(1).eq(y).sum().item<int64_t>();
      seen += y.size(0);
    }
    std::printf("epoch %d loss %.4f aux_loss %.4f acc %.4f\n", epoch, cls_sum / batches,
                aux_sum / std::max<int64_t>(aux_batches, 1), static_cast<double>(correct) / seen);
  }

  model->eval();
  torch::NoGradGuard no_grad;
  double cls_sum = 0.0, aux_sum = 0.0;
  int64_t correct = 0;
  for (const auto& batch : *test_loader) {
    auto x = batch.data.to(device);
    auto y = batch.target.select(1, 0).to(torch::kLong).to(device);
    auto z = batch.target.select(1, 1).to(device);
    auto h = model->features(x);
    auto logits = model->classify(h);
    cls_sum += F::cross_entropy(logits, y, F::CrossEntropyFuncOptions().reduction(torch::kSum)).item<double>();
    aux_sum += F::mse_loss(model->regress(h), z, F::MSELossFuncOptions().reduction(torch::kSum)).item<double>();
    correct += logits.argmax(1).eq(y).sum().item<int64_t>();
  }
  std::printf("test loss %.4f acc %.4f aux_loss %.4f\n", cls_sum / kTest, static_cast<double>(correct) / kTest,
              aux_sum / kTest);
  return 0;
}
