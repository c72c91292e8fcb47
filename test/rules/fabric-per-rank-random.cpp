// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err
// No finding: every loop here is migrated.
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: count 0 < %t.err
// RUN: %migrate %t.cpp -- %flags | diff -u %t.cpp -
#include <torch/torch.h>

#include <random>
#include <utility>
#include <vector>

struct NetImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

// nanoGPT's get_batch: random offsets into the token stream, each step.
std::pair<torch::Tensor, torch::Tensor> get_batch(const torch::Tensor& data, int64_t block, int64_t bs) {
  auto ix = torch::randint(data.size(0) - block, {bs});
  std::vector<torch::Tensor> xs, ys;
  for (int64_t b = 0; b < bs; ++b) {
    int64_t start = ix[b].item<int64_t>();
    xs.push_back(data.slice(0, start, start + block));
    ys.push_back(data.slice(0, start + 1, start + 1 + block));
  }
  return {torch::stack(xs), torch::stack(ys)};
}

// A simulated environment with its own engine, seeded by its maker: each
// rank's plays its own episodes.
// CHECK-LABEL: {{^}}class CartPole {{{$}}
// CHECK: {{^}}  explicit CartPole(unsigned seed) : gen_(seed + fabric::global_rank()), noise_(-0.05f, 0.05f) {}{{$}}
class CartPole {
 public:
  explicit CartPole(unsigned seed) : gen_(seed), noise_(-0.05f, 0.05f) {}
  torch::Tensor reset() { return torch::tensor({static_cast<int64_t>(noise_(gen_) * 100)}); }
  bool step(int64_t action) { return noise_(gen_) > 0.04f || action < 0; }

 private:
  std::mt19937 gen_;
  std::uniform_real_distribution<float> noise_;
};

int main() {
  Net model;
  torch::optim::Adam optimizer(model->parameters());
  // Data made before the loops: the same on every rank.
  // CHECK: {{^}}  auto tokens = torch::randint(100, {4096});{{$}}
  auto tokens = torch::randint(100, {4096});

  // An iteration-based trainer drawing its batch each step (in a helper).
  // CHECK: {{^}}  for (int step = 0; step < 1000; ++step) {{{$}}
  // CHECK-NEXT: {{^}}    auto per_rank_draws = fabric.per_rank_random();{{$}}
  // CHECK-NEXT: {{^}}    auto [xb, yb] = get_batch(tokens, 32, 16);{{$}}
  for (int step = 0; step < 1000; ++step) {
    auto [xb, yb] = get_batch(tokens, 32, 16);
    auto loss = torch::mse_loss(model->forward(xb), yb);
    loss.backward();
    optimizer.step();
  }

  // Synthetic batches drawn in the loop.
  // CHECK: {{^}}  for (int step = 0; step < 100; ++step) {{{$}}
  // CHECK-NEXT: {{^}}    auto per_rank_draws = fabric.per_rank_random();{{$}}
  for (int step = 0; step < 100; ++step) {
    auto x = torch::randn({32, 8});
    auto loss = torch::mse_loss(model->forward(x), x.sum());
    loss.backward();
    optimizer.step();
  }

  // REINFORCE: the rollout samples actions, then one update per episode.
  // The environment's engine and the scope are per rank.
  // CHECK: {{^}}  CartPole env(42);{{$}}
  // CHECK: {{^}}  for (int episode = 0; episode < 500; ++episode) {{{$}}
  // CHECK-NEXT: {{^}}    auto per_rank_draws = fabric.per_rank_random();{{$}}
  CartPole env(42);
  for (int episode = 0; episode < 500; ++episode) {
    auto state = env.reset();
    std::vector<torch::Tensor> log_probs;
    bool done = false;
    while (!done) {
      auto probs = model->forward(state);
      auto action = probs.multinomial(1);
      log_probs.push_back(probs[action.item<int64_t>()]);
      done = env.step(action.item<int64_t>());
    }
    auto loss = torch::stack(log_probs).sum();
    loss.backward();
    optimizer.step();
  }

  // Epsilon-greedy with the program's own engine, and one seeded from the
  // device (already different on every rank: left alone). No LibTorch draw:
  // no scope, the seed only.
  // CHECK: {{^}}  std::mt19937 rng(123 + fabric::global_rank());{{$}}
  // CHECK: {{^}}  std::mt19937 jitter(std::random_device{}());{{$}}
  // CHECK: {{^}}  for (int step = 0; step < 200; ++step) {{{$}}
  // CHECK-NOT: per_rank_random
  // CHECK: {{^}}    auto q = model->forward(tokens.slice(0, 0, 8));{{$}}
  std::mt19937 rng(123);
  std::mt19937 jitter(std::random_device{}());
  std::uniform_real_distribution<float> coin(0.f, 1.f);
  for (int step = 0; step < 200; ++step) {
    auto q = model->forward(tokens.slice(0, 0, 8));
    int64_t action = coin(rng) < 0.1f ? static_cast<int64_t>(jitter() % 4) : q.argmax(0).item<int64_t>();
    auto loss = q[action].sum();
    loss.backward();
    optimizer.step();
  }

  // Sampling after training (no backward pass): nothing per rank.
  // CHECK: {{^}}  for (int t = 0; t < 20; ++t) {{{$}}
  // CHECK-NOT: per_rank_random
  // CHECK: {{^}}  return 0;{{$}}
  torch::NoGradGuard no_grad;
  for (int t = 0; t < 20; ++t) {
    auto next = model->forward(tokens.slice(0, t, t + 8)).multinomial(1);
    std::cout << next.item<int64_t>();
  }
  return 0;
}
