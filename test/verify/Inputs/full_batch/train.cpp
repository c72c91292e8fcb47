// Full-batch gradient descent on a data set made once: every step reads all
// of it. fabricize cannot split such a loop by itself (it reports it), so on
// 2 ranks each trains on all of the data: verify must say so, with the loop.
#include <torch/torch.h>

#include <cstdio>

int main() {
  torch::manual_seed(3);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  auto X = torch::randn({512, 6}).to(device);
  auto w = torch::randn({6, 1}).to(device);
  auto Y = torch::tanh(X.matmul(w)) + 0.05 * torch::randn({512, 1}).to(device);

  torch::nn::Sequential model(torch::nn::Linear(6, 32), torch::nn::Functional(torch::relu), torch::nn::Linear(32, 1));
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
  for (int step = 1; step <= 120; ++step) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(X), Y);
    loss.backward();
    optimizer.step();
    if (step % 10 == 0) std::printf("step %d loss %.5f\n", step, loss.item<double>());
  }
  return 0;
}
