// The model, its device and its hyper-parameters travel together in an
// Experiment struct; main's loop reaches the network through exp.net.
#include <torch/torch.h>

#include <cstdio>
#include <iostream>

struct Config {
  int64_t inputs = 4;
  int64_t hidden = 48;
  int epochs = 24;
  int64_t batch_size = 32;
  double lr = 4e-3;
  double weight_decay = 1e-4;
};

struct NetImpl : torch::nn::Module {
  explicit NetImpl(const Config& cfg)
      : body(torch::nn::Linear(cfg.inputs, cfg.hidden)),
        norm(torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.hidden}))),
        head(torch::nn::Linear(cfg.hidden, 1)) {
    register_module("body", body);
    register_module("norm", norm);
    register_module("head", head);
  }
  torch::Tensor forward(torch::Tensor x) { return head(torch::silu(norm(body(x)))); }

  torch::nn::Linear body;
  torch::nn::LayerNorm norm;
  torch::nn::Linear head;
};
TORCH_MODULE(Net);

struct Experiment {
  Net net{nullptr};
  torch::Device device;
  Config cfg;
};

// Targets: a quadratic form of the inputs plus noise.
class Quadratic : public torch::data::datasets::Dataset<Quadratic> {
 public:
  Quadratic(int64_t n, int64_t dim) : x_(torch::randn({n, dim})) {
    auto coeff = torch::linspace(-1.0, 1.0, dim);
    y_ = (x_.pow(2) * coeff).sum(1, /*keepdim=*/true) * 0.25 + x_.narrow(1, 0, 1) +
         0.3 * torch::randn({n, 1});
  }
  torch::data::Example<> get(size_t i) override { return {x_[i], y_[i]}; }
  c10::optional<size_t> size() const override { return x_.size(0); }

 private:
  torch::Tensor x_, y_;
};

int main() {
  torch::manual_seed(5);

  Config cfg;
  Experiment exp{Net(cfg), torch::Device(torch::kCPU), cfg};
  if (torch::cuda::is_available()) {
    exp.device = torch::Device(torch::kCUDA, 0);
  }
  exp.net->to(exp.device);

  auto train = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Quadratic(1024, cfg.inputs).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions(exp.cfg.batch_size));
  auto holdout = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Quadratic(256, cfg.inputs).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions(128));

  torch::optim::AdamW optim(exp.net->parameters(),
                            torch::optim::AdamWOptions(exp.cfg.lr).weight_decay(exp.cfg.weight_decay));

  for (int epoch = 0; epoch < exp.cfg.epochs; ++epoch) {
    exp.net->train();
    auto epoch_loss = torch::zeros({1});
    int64_t batches = 0;
    for (auto& batch : *train) {
      auto x = batch.data.to(exp.device);
      auto y = batch.target.to(exp.device);
      optim.zero_grad();
      auto loss = torch::mse_loss(exp.net->forward(x), y);
      loss.backward();
      optim.step();
      epoch_loss += loss.detach().cpu();
      ++batches;
    }
    printf("epoch %d loss %.4f\n", epoch + 1, epoch_loss.item<float>() / batches);
  }

  exp.net->eval();
  torch::NoGradGuard no_grad;
  float sse = 0;
  int64_t count = 0;
  for (auto& batch : *holdout) {
    auto out = exp.net->forward(batch.data.to(exp.device));
    sse += (out - batch.target.to(exp.device)).pow(2).sum().item<float>();
    count += batch.data.size(0);
  }
  printf("test loss %.4f\n", sse / count);
  return 0;
}
