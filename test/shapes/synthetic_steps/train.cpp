// Polynomial regression in the manner of pytorch/examples' cpp/regression:
// a hidden target polynomial, a fresh random batch drawn at every step, a
// linear model on polynomial features. Here the step count is fixed and the
// targets carry noise (std 0.3), so the loss settles near 0.09.
#include <torch/torch.h>

#include <cstdio>
#include <utility>

constexpr int64_t kDegree = 4;

// Builds a feature matrix with columns [x, x^2, x^3, x^4].
torch::Tensor make_features(const torch::Tensor& x) {
  auto col = x.unsqueeze(1);
  return torch::cat({col, col.pow(2), col.pow(3), col.pow(4)}, 1);
}

// Approximated function: y = x W + b + noise.
torch::Tensor f(const torch::Tensor& x, const torch::Tensor& W_target, const torch::Tensor& b_target) {
  return x.mm(W_target) + b_target.item();
}

std::pair<torch::Tensor, torch::Tensor> get_batch(int64_t batch_size, const torch::Tensor& W_target,
                                                  const torch::Tensor& b_target) {
  auto random = torch::randn({batch_size}).clamp(-2.0, 2.0);
  auto x = make_features(random);
  auto noise = 0.3 * torch::randn({batch_size, 1});
  auto y = f(x, W_target, b_target) + noise;
  return std::make_pair(x, y);
}

int main() {
  torch::manual_seed(42);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  auto W_target = torch::randn({kDegree, 1}) * 0.5;
  auto b_target = torch::randn({1}) * 0.5;

  // A fixed evaluation batch, drawn before training.
  auto eval_batch = get_batch(1024, W_target, b_target);
  auto eval_x = eval_batch.first.to(device);
  auto eval_y = eval_batch.second.to(device);

  torch::nn::Linear fc(kDegree, 1);
  fc->to(device);
  torch::optim::SGD optim(fc->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));

  const int64_t batch_size = 64;
  const int total_steps = 1500, print_every = 150;
  double window_loss = 0;
  for (int step = 1; step <= total_steps; ++step) {
    auto [batch_x, batch_y] = get_batch(batch_size, W_target, b_target);
    batch_x = batch_x.to(device);
    batch_y = batch_y.to(device);

    fc->zero_grad();
    auto output = torch::smooth_l1_loss(fc(batch_x), batch_y);
    auto loss = output.item<float>();
    output.backward();
    optim.step();

    window_loss += loss;
    if (step % print_every == 0) {
      std::printf("step %d loss %.4f\n", step, window_loss / print_every);
      window_loss = 0;
    }
  }

  torch::NoGradGuard no_grad;
  auto final_loss = torch::mse_loss(fc(eval_x), eval_y).item<double>();
  std::printf("final eval_loss %.4f\n", final_loss);
  std::printf("learned w [%.3f %.3f %.3f %.3f] b %.3f\n", fc->weight[0][0].item<double>(),
              fc->weight[0][1].item<double>(), fc->weight[0][2].item<double>(), fc->weight[0][3].item<double>(),
              fc->bias[0].item<double>());
  std::printf("target  w [%.3f %.3f %.3f %.3f] b %.3f\n", W_target[0][0].item<double>(),
              W_target[1][0].item<double>(), W_target[2][0].item<double>(), W_target[3][0].item<double>(),
              b_target[0].item<double>());
  return 0;
}
