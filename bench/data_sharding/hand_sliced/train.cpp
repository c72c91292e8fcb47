// Whole data-set tensors sliced by hand over a permutation drawn per epoch.
//   train [epochs] [samples] [hidden] [batch]
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 3;
  const int64_t n = argc > 2 ? std::atoll(argv[2]) : 4096;
  const int64_t hidden = argc > 3 ? std::atoll(argv[3]) : 256;
  const int64_t batch_size = argc > 4 ? std::atoll(argv[4]) : 64;
  torch::manual_seed(2);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  auto X = torch::randn({n, 32});
  auto w = torch::randn({32, 1});
  auto Y = torch::sin(X.matmul(w)) + 0.1 * torch::randn({n, 1});
  torch::nn::Sequential model(torch::nn::Linear(32, hidden), torch::nn::ReLU(), torch::nn::Linear(hidden, hidden),
                              torch::nn::ReLU(), torch::nn::Linear(hidden, hidden), torch::nn::ReLU(),
                              torch::nn::Linear(hidden, 1));
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    auto perm = torch::randperm(n);
    double loss_sum = 0;
    int64_t seen = 0;
    for (int64_t i = 0; i < n; i += batch_size) {
      auto idx = perm.slice(0, i, std::min(i + batch_size, n));
      auto x = X.index_select(0, idx).to(device);
      auto y = Y.index_select(0, idx).to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>() * x.size(0);
      seen += x.size(0);
    }
    std::printf("epoch %d loss %.5f\n", epoch, loss_sum / seen);
  }
  return 0;
}
