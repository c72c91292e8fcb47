// An iteration-based trainer drawing random batches each step.
//   train [steps] [samples] [hidden] [batch]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 300;
  const int64_t n = argc > 2 ? std::atoll(argv[2]) : 4096;
  const int64_t hidden = argc > 3 ? std::atoll(argv[3]) : 256;
  const int64_t batch_size = argc > 4 ? std::atoll(argv[4]) : 64;
  torch::manual_seed(3);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  auto X = torch::randn({n, 32});
  auto Y = X.pow(2).sum(1, true);
  torch::nn::Sequential model(torch::nn::Linear(32, hidden), torch::nn::ReLU(), torch::nn::Linear(hidden, hidden),
                              torch::nn::ReLU(), torch::nn::Linear(hidden, 1));
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));
  double window = 0;
  for (int step = 1; step <= steps; ++step) {
    auto idx = torch::randint(n, {batch_size});
    auto x = X.index_select(0, idx).to(device);
    auto y = Y.index_select(0, idx).to(device);
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
    window += loss.item<double>();
    if (step % 100 == 0) {
      std::printf("step %d loss %.4f\n", step, window / 100);
      window = 0;
    }
  }
  return 0;
}
