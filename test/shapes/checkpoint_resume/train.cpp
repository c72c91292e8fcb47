// Saves the model and the optimizer after every epoch, then proves the files
// are usable: reloads both into fresh objects and evaluates the reloaded
// model.
#include <torch/torch.h>

#include <cstdio>
#include <iostream>

struct SmallNetImpl : torch::nn::Module {
  SmallNetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(4, 32));
    fc2 = register_module("fc2", torch::nn::Linear(32, 2));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2->forward(torch::relu(fc1->forward(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(SmallNet);

// Two interleaved half-moons lifted into 4-D, 10% label noise.
class Moons : public torch::data::datasets::Dataset<Moons> {
 public:
  explicit Moons(int64_t n) {
    labels_ = torch::randint(2, {n}, torch::kLong);
    auto t = torch::rand({n}) * M_PI;
    auto lf = labels_.to(torch::kFloat);
    auto px = torch::cos(t) + lf * 1.0;
    auto py = torch::sin(t) * (1 - 2 * lf) + lf * 0.5;
    points_ = torch::stack({px, py, px - py, px * py}, 1) + 0.15 * torch::randn({n, 4});
    labels_ = torch::where(torch::rand({n}) < 0.1, 1 - labels_, labels_);
  }
  torch::data::Example<> get(size_t i) override { return {points_[i], labels_[i]}; }
  torch::optional<size_t> size() const override { return labels_.size(0); }

 private:
  torch::Tensor points_, labels_;
};

template <typename Loader>
double evaluate(SmallNet& net, Loader& loader, torch::Device device) {
  torch::NoGradGuard no_grad;
  net->eval();
  double total = 0;
  int64_t n = 0;
  for (auto& batch : loader) {
    auto out = net->forward(batch.data.to(device));
    total += torch::cross_entropy_loss(out, batch.target.to(device), {}, at::Reduction::Sum)
                 .template item<double>();
    n += batch.data.size(0);
  }
  return total / n;
}

int main() {
  torch::manual_seed(1234);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);

  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Moons(1280).map(torch::data::transforms::Stack<>()), 64);
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Moons(256).map(torch::data::transforms::Stack<>()), 128);

  SmallNet net;
  net->to(device);
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(1e-2));

  for (int epoch = 1; epoch <= 30; ++epoch) {
    net->train();
    double sum = 0;
    int steps = 0;
    for (auto& batch : *train_loader) {
      optimizer.zero_grad();
      auto loss = torch::cross_entropy_loss(net->forward(batch.data.to(device)),
                                            batch.target.to(device));
      loss.backward();
      optimizer.step();
      sum += loss.item<double>();
      ++steps;
    }
    std::printf("epoch %d loss %.4f\n", epoch, sum / steps);
    torch::save(net, "model.pt");
    torch::save(optimizer, "optimizer.pt");
  }
  std::printf("test loss %.4f\n", evaluate(net, *test_loader, device));

  // Load everything back into fresh objects, as a later run would.
  SmallNet restored;
  torch::load(restored, "model.pt");
  restored->to(device);
  torch::optim::Adam restored_optimizer(restored->parameters(), torch::optim::AdamOptions(1e-2));
  torch::load(restored_optimizer, "optimizer.pt");
  std::printf("reloaded test loss %.4f\n", evaluate(restored, *test_loader, device));
  return 0;
}
