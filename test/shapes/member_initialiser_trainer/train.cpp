// A compact trainer class with no constructor of its own: the network, the
// optimizer and the loss are its default member initialisers. main owns the
// data and hands the trainer one batch at a time.
#include <torch/torch.h>

#include <iostream>

struct NetImpl : torch::nn::Module {
  NetImpl(int64_t inputs, int64_t hidden)
      : hidden_layer(register_module("hidden_layer", torch::nn::Linear(inputs, hidden))),
        out(register_module("out", torch::nn::Linear(hidden, 1))) {}
  torch::Tensor forward(torch::Tensor x) { return out(torch::tanh(hidden_layer(x))); }

  torch::nn::Linear hidden_layer, out;
};
TORCH_MODULE(Net);

class Waves : public torch::data::datasets::Dataset<Waves> {
 public:
  explicit Waves(int64_t n) : x_(torch::rand({n, 3}) * 4 - 2) {
    y_ = torch::sin(x_.select(1, 0)).unsqueeze(1) + 0.5 * x_.select(1, 1).unsqueeze(1) * x_.select(1, 2).unsqueeze(1) +
         0.05 * torch::randn({n, 1});
  }
  torch::data::Example<> get(size_t i) override { return {x_[i], y_[i]}; }
  torch::optional<size_t> size() const override { return x_.size(0); }

 private:
  torch::Tensor x_, y_;
};

class Regressor {
 public:
  float step(const torch::Tensor& x, const torch::Tensor& y) {
    net_->train();
    optimizer_.zero_grad();
    torch::Tensor loss = criterion_(net_->forward(x), y);
    loss.backward();
    optimizer_.step();
    return loss.item<float>();
  }

  float error(const torch::Tensor& x, const torch::Tensor& y) {
    torch::NoGradGuard no_grad;
    net_->eval();
    return criterion_(net_->forward(x), y).item<float>();
  }

 private:
  Net net_{3, 32};
  torch::optim::Adam optimizer_{net_->parameters(), torch::optim::AdamOptions(5e-3)};
  torch::nn::MSELoss criterion_;
};

int main() {
  torch::manual_seed(11);
  auto train = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Waves(1536).map(torch::data::transforms::Stack<>()), torch::data::DataLoaderOptions(32));
  auto holdout = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Waves(384).map(torch::data::transforms::Stack<>()), torch::data::DataLoaderOptions(64));

  Regressor model;
  for (int epoch = 1; epoch <= 12; ++epoch) {
    float total = 0;
    int batches = 0;
    for (auto& batch : *train) {
      total += model.step(batch.data, batch.target);
      ++batches;
    }
    float held = 0;
    int held_batches = 0;
    for (auto& batch : *holdout) {
      held += model.error(batch.data, batch.target);
      ++held_batches;
    }
    std::cout << "epoch " << epoch << " loss " << total / batches << " val_loss " << held / held_batches << "\n";
  }
  return 0;
}
