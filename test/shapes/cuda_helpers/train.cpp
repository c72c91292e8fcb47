// Small device helpers of the kind that accumulate in research code: move a
// tensor to the GPU when there is one, allocate on a given device, print
// tensor statistics.
#include <torch/torch.h>

#include <iomanip>
#include <iostream>
#include <string>

torch::Tensor to_device(torch::Tensor t) { return torch::cuda::is_available() ? t.cuda() : t; }

torch::Tensor zeros_on(int64_t n, torch::Device device) {
  return torch::zeros({n}, torch::TensorOptions().device(device));
}

void print_stats(const std::string& name, const torch::Tensor& t) {
  std::cout << name << " mean " << std::setprecision(3) << t.mean().item<float>() << " std "
            << t.std().item<float>() << " min " << t.min().item<float>() << " max "
            << t.max().item<float>() << std::endl;
}

struct TabularNetImpl : torch::nn::Module {
  TabularNetImpl(int64_t features, int64_t classes)
      : layers(torch::nn::Linear(features, 32), torch::nn::ReLU(), torch::nn::Linear(32, classes)) {
    register_module("layers", layers);
  }
  torch::Tensor forward(torch::Tensor x) { return layers->forward(x); }
  torch::nn::Sequential layers;
};
TORCH_MODULE(TabularNet);

// Three classes defined by the quadrant-ish sign pattern of two of 6 features.
class Tabular : public torch::data::datasets::Dataset<Tabular> {
 public:
  explicit Tabular(int64_t n) : x_(torch::randn({n, 6})) {
    auto a = x_.select(1, 0), b = x_.select(1, 3);
    y_ = torch::where(a + b > 0.5, torch::full_like(a, 2), torch::where(a - b > 0, torch::ones_like(a), torch::zeros_like(a)))
             .to(torch::kLong);
    auto flip = torch::rand({n}) < 0.1;
    y_ = torch::where(flip, torch::randint(3, {n}, torch::kLong), y_);
  }
  torch::data::Example<> get(size_t i) override { return {x_[i], y_[i]}; }
  torch::optional<size_t> size() const override { return y_.size(0); }

 private:
  torch::Tensor x_, y_;
};

int main() {
  torch::manual_seed(64);
  const torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  TabularNet net(6, 3);
  if (torch::cuda::is_available()) net->to(torch::kCUDA);
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(5e-3));

  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Tabular(1024).map(torch::data::transforms::Stack<>()), 32);
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Tabular(256).map(torch::data::transforms::Stack<>()), 64);

  for (int epoch = 1; epoch <= 15; ++epoch) {
    auto per_class_loss = zeros_on(3, device);  // summed loss for each true class
    auto per_class_count = zeros_on(3, device);
    for (auto& batch : *train_loader) {
      auto x = to_device(batch.data);
      auto y = to_device(batch.target);
      optimizer.zero_grad();
      auto losses = torch::nn::functional::cross_entropy(
          net->forward(x), y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
      losses.mean().backward();
      optimizer.step();
      per_class_loss.index_add_(0, y, losses.detach());
      per_class_count.index_add_(0, y, torch::ones_like(losses));
    }
    auto epoch_loss = per_class_loss.sum() / per_class_count.sum();
    std::cout << "epoch " << epoch << " loss " << std::setprecision(4) << epoch_loss.item<float>()
              << std::endl;
  }
  print_stats("layer0.weight", net->layers[0]->as<torch::nn::Linear>()->weight.detach());

  torch::NoGradGuard no_grad;
  auto test_loss = zeros_on(1, device);
  int64_t correct = 0, count = 0;
  for (auto& batch : *test_loader) {
    auto x = to_device(batch.data), y = to_device(batch.target);
    auto logits = net->forward(x);
    test_loss += torch::nn::functional::cross_entropy(
        logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    correct += logits.argmax(1).eq(y).sum().item<int64_t>();
    count += y.size(0);
  }
  std::cout << "test loss " << test_loss.item<float>() / count << " acc "
            << static_cast<double>(correct) / count << std::endl;
  return 0;
}
