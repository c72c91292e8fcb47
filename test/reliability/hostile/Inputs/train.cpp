#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl() : fc(register_module("fc", torch::nn::Linear(4, 1))) {}
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

int main() {
  torch::Device device(torch::kCUDA);
  Net model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  for (int step = 0; step < 10; ++step) {
    torch::Tensor x = torch::randn({8, 4}).to(device);
    optimizer.zero_grad();
    torch::Tensor loss = torch::mse_loss(model->forward(x), x);
    loss.backward();
    optimizer.step();
  }
  return 0;
}
