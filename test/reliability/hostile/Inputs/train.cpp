#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl() : fc(register_module("fc", torch::nn::Linear(4, 1))) {}
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t i) override {
    torch::Tensor x = torch::randn({4});
    return {x, x};
  }
  torch::optional<size_t> size() const override { return 80; }
};

int main() {
  torch::Device device(torch::kCUDA);
  Net model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(Points().map(torch::data::transforms::Stack<>()), 8);
  for (auto& batch : *loader) {
    torch::Tensor x = batch.data.to(device);
    optimizer.zero_grad();
    torch::Tensor loss = torch::mse_loss(model->forward(x), x);
    loss.backward();
    optimizer.step();
  }
  return 0;
}
