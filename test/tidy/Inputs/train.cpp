// A single-device training program for the plugin's --fix tests: most
// rules match somewhere here, and several edit the same lines.
#include <torch/torch.h>

#include <iostream>

struct NetImpl : torch::nn::Module {
  NetImpl() : fc(register_module("fc", torch::nn::Linear(2, 1))) {}
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

int main() {
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  Net model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  for (int epoch = 0; epoch < 3; ++epoch) {
    torch::Tensor x = torch::randn({8, 2}).to(device);
    torch::Tensor y = torch::randn({8, 1}).cuda();
    optimizer.zero_grad();
    torch::Tensor loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
    std::cout << "epoch " << epoch << " loss " << loss.item<float>() << std::endl;
  }
  torch::save(model, "model.pt");
  return 0;
}
