// Classifies noisy sine-wave snippets by frequency with a small 1-D CNN.
// The data come from a user-defined torch::data::Dataset, stacked into
// batches by the Stack<> transform.
#include <torch/torch.h>

#include <iostream>

constexpr int64_t kLength = 32;
constexpr int64_t kNumClasses = 3;

class MyDataset : public torch::data::Dataset<MyDataset> {
 public:
  explicit MyDataset(int64_t count) {
    labels_ = torch::randint(kNumClasses, {count}, torch::kLong);
    auto freq = (labels_.to(torch::kFloat) + 1).unsqueeze(1) * 0.25;  // 0.25, 0.5, 0.75 rad/step
    auto phase = torch::rand({count, 1}) * 6.2832;
    auto t = torch::arange(kLength, torch::kFloat).unsqueeze(0);
    signals_ = (torch::sin(freq * t + phase) + 0.5 * torch::randn({count, kLength})).unsqueeze(1);
    // ~10% of the recordings were annotated wrongly
    auto wrong = torch::rand({count}) < 0.1;
    labels_ = torch::where(wrong, torch::randint(kNumClasses, {count}, torch::kLong), labels_);
  }

  torch::data::Example<> get(size_t index) override {
    return {signals_[index], labels_[index]};
  }

  torch::optional<size_t> size() const override { return labels_.size(0); }

 private:
  torch::Tensor signals_;  // [N, 1, kLength]
  torch::Tensor labels_;   // [N]
};

struct ConvNetImpl : torch::nn::Module {
  torch::nn::Conv1d conv{nullptr};
  torch::nn::Linear fc{nullptr};

  ConvNetImpl() {
    conv = register_module("conv", torch::nn::Conv1d(torch::nn::Conv1dOptions(1, 16, 5).padding(2)));
    fc = register_module("fc", torch::nn::Linear(16 * (kLength / 4), kNumClasses));
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool1d(torch::relu(conv->forward(x)), 4);
    return fc->forward(x.flatten(1));
  }
};
TORCH_MODULE(ConvNet);

int main() {
  torch::manual_seed(2718);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);

  auto dataset = MyDataset(1536).map(torch::data::transforms::Stack<>());
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(dataset), torch::data::DataLoaderOptions().batch_size(32).workers(0));
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      MyDataset(512).map(torch::data::transforms::Stack<>()), 128);

  ConvNet net;
  net->to(device);
  torch::optim::Adam adam(net->parameters(), 3e-3);

  for (size_t epoch = 1; epoch <= 15; ++epoch) {
    net->train();
    double total = 0;
    size_t count = 0;
    for (auto& batch : *loader) {
      auto data = batch.data.to(device);
      auto target = batch.target.to(device);

      adam.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(net->forward(data), target);
      loss.backward();
      adam.step();

      total += loss.item<double>();
      ++count;
    }
    std::cout << "epoch " << epoch << " loss " << total / count << std::endl;
  }

  net->eval();
  torch::NoGradGuard no_grad;
  double test_loss = 0;
  int64_t correct = 0, n = 0;
  for (auto& batch : *test_loader) {
    auto data = batch.data.to(device);
    auto target = batch.target.to(device);
    auto logits = net->forward(data);
    test_loss += torch::nn::functional::cross_entropy(logits, target).item<double>() * data.size(0);
    correct += logits.argmax(1).eq(target).sum().item<int64_t>();
    n += data.size(0);
  }
  std::cout << "test loss " << test_loss / n << " acc " << static_cast<double>(correct) / n
            << std::endl;
}
