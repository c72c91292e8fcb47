// One optimisation step factored into a plain (non-template) helper that
// receives the model and the optimizer by reference.
#include <torch/torch.h>

#include <cstdio>

class NetImpl : public torch::nn::Module {
 public:
  NetImpl(int64_t in_features, int64_t classes)
      : fc1_(register_module("fc1", torch::nn::Linear(in_features, 32))),
        bn_(register_module("bn", torch::nn::BatchNorm1d(32))),
        fc2_(register_module("fc2", torch::nn::Linear(32, classes))) {}

  torch::Tensor forward(torch::Tensor x) { return fc2_(torch::relu(bn_(fc1_(x)))); }

 private:
  torch::nn::Linear fc1_;
  torch::nn::BatchNorm1d bn_;
  torch::nn::Linear fc2_;
};
TORCH_MODULE(Net);

// 5 classes whose means lie on a circle in the first two of 10 features.
class Ring : public torch::data::datasets::Dataset<Ring> {
 public:
  explicit Ring(int64_t n) {
    y_ = torch::randint(0, 5, {n}, torch::kLong);
    auto angle = y_.to(torch::kFloat) * (2 * M_PI / 5);
    x_ = torch::randn({n, 10}) * 0.5;
    x_.select(1, 0).add_(2.5 * torch::cos(angle));
    x_.select(1, 1).add_(2.5 * torch::sin(angle));
    auto noisy = torch::rand({n}) < 0.1;
    y_.index_put_({noisy}, torch::randint(0, 5, {noisy.sum().item<int64_t>()}, torch::kLong));
  }
  torch::data::Example<> get(size_t index) override { return {x_[index], y_[index]}; }
  torch::optional<size_t> size() const override { return y_.size(0); }

 private:
  torch::Tensor x_, y_;
};

torch::Tensor train_step(Net& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x,
                         const torch::Tensor& y) {
  optimizer.zero_grad();
  auto output = model->forward(x);
  auto loss = torch::cross_entropy_loss(output, y);
  loss.backward();
  optimizer.step();
  return loss.detach();
}

int main() {
  torch::manual_seed(31);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);

  Net model(10, 5);
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));

  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Ring(1024).map(torch::data::transforms::Stack<>()), 32);
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Ring(512).map(torch::data::transforms::Stack<>()), 128);

  for (int epoch = 1; epoch <= 12; ++epoch) {
    model->train();
    float total = 0.f;
    int steps = 0;
    for (auto& batch : *train_loader) {
      auto loss = train_step(model, optimizer, batch.data.to(device), batch.target.to(device));
      total += loss.item<float>();
      steps++;
    }
    printf("epoch %d loss %.4f\n", epoch, total / steps);
  }

  model->eval();
  torch::NoGradGuard no_grad;
  float loss_sum = 0.f;
  long correct = 0, seen = 0;
  for (auto& batch : *test_loader) {
    auto x = batch.data.to(device), y = batch.target.to(device);
    auto out = model->forward(x);
    loss_sum += torch::cross_entropy_loss(out, y).item<float>() * y.size(0);
    correct += out.argmax(1).eq(y).sum().item<long>();
    seen += y.size(0);
  }
  printf("test loss %.4f acc %.3f\n", loss_sum / seen, static_cast<double>(correct) / seen);
  return 0;
}
