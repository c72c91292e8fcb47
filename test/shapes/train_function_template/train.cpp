// The epoch loop lives in function templates that take the model, the loader
// and the optimizer by reference (the loader type is a template parameter,
// as in PyTorch's MNIST example).
#include <torch/torch.h>

#include <iostream>
#include <utility>

struct ModelImpl : torch::nn::Module {
  ModelImpl(int64_t features, int64_t classes) {
    fc1 = register_module("fc1", torch::nn::Linear(features, 64));
    drop = register_module("drop", torch::nn::Dropout(0.1));
    fc2 = register_module("fc2", torch::nn::Linear(64, classes));
  }
  torch::Tensor forward(torch::Tensor x) {
    return fc2(drop(torch::relu(fc1(x))));
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::Dropout drop{nullptr};
};
TORCH_MODULE(Model);

// Two classes separated by a sphere (inside vs outside), 8 features,
// 10% label noise.
class Shells : public torch::data::datasets::Dataset<Shells> {
 public:
  explicit Shells(int64_t n) {
    x_ = torch::randn({n, 8});
    y_ = (x_.norm(2, 1) > 2.7).to(torch::kLong);
    auto flip = torch::rand({n}) < 0.1;
    y_ = torch::where(flip, 1 - y_, y_);
  }
  torch::data::Example<> get(size_t i) override { return {x_[i], y_[i]}; }
  torch::optional<size_t> size() const override { return x_.size(0); }

 private:
  torch::Tensor x_, y_;
};

template <class Loader>
double train_epoch(Model& model, Loader& loader, torch::optim::Optimizer& opt, torch::Device device) {
  model->train();
  double total = 0;
  size_t batches = 0;
  for (auto& batch : loader) {
    auto x = batch.data.to(device);
    auto y = batch.target.to(device);
    opt.zero_grad();
    auto loss = torch::cross_entropy_loss(model->forward(x), y);
    loss.backward();
    opt.step();
    total += loss.template item<double>();
    ++batches;
  }
  return total / static_cast<double>(batches);
}

template <class Loader>
std::pair<double, double> evaluate(Model& model, Loader& loader, torch::Device device) {
  torch::NoGradGuard no_grad;
  model->eval();
  double loss = 0, correct = 0, count = 0;
  for (auto& batch : loader) {
    auto x = batch.data.to(device);
    auto y = batch.target.to(device);
    auto logits = model->forward(x);
    loss += torch::cross_entropy_loss(logits, y, {}, at::Reduction::Sum).template item<double>();
    correct += logits.argmax(1).eq(y).sum().template item<double>();
    count += y.size(0);
  }
  return {loss / count, correct / count};
}

int main() {
  torch::manual_seed(99);
  torch::Device device = torch::kCPU;
  if (torch::cuda::is_available()) device = torch::kCUDA;

  Model model(8, 2);
  model->to(device);
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(5e-3));

  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Shells(2048).map(torch::data::transforms::Stack<>()), 64);
  auto test_loader = torch::data::make_data_loader(
      Shells(512).map(torch::data::transforms::Stack<>()), 256);

  for (int epoch = 1; epoch <= 20; ++epoch) {
    double loss = train_epoch(model, *train_loader, opt, device);
    std::cout << "epoch " << epoch << " loss " << loss << "\n";
  }
  auto [test_loss, test_acc] = evaluate(model, *test_loader, device);
  std::cout << "test loss " << test_loss << " acc " << test_acc << std::endl;
}
