// REINFORCE on a slippery chain: one episode per update. Each episode's
// return goes into a window of the last 20; whenever the window's mean is
// the best so far, the policy is saved (RL code's "best model" checkpoint,
// judged on the agent's own recent episodes).
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <numeric>
#include <random>
#include <vector>

class Chain {
 public:
  struct Step {
    torch::Tensor observation;
    double reward;
    bool done;
  };

  explicit Chain(unsigned seed) : rng_(seed) {}

  torch::Tensor reset() {
    position_ = 0;
    steps_ = 0;
    return observe();
  }

  Step step(int64_t action) {
    std::uniform_real_distribution<double> slip(0.0, 1.0);
    int move = action == 1 ? 1 : -1;
    if (slip(rng_) < 0.15) move = -move;
    position_ = std::clamp(position_ + move, 0, kLength - 1);
    ++steps_;
    const bool reached = position_ == kLength - 1;
    return {observe(), reached ? 1.0 : -0.05, reached || steps_ >= 24};
  }

 private:
  static constexpr int kLength = 6;
  torch::Tensor observe() const {
    auto observation = torch::zeros({kLength});
    observation[position_] = 1.0;
    return observation;
  }

  std::mt19937 rng_;
  int position_ = 0;
  int steps_ = 0;
};

int main() {
  torch::manual_seed(3);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  Chain env(1234);
  torch::nn::Sequential policy(torch::nn::Linear(6, 32), torch::nn::ReLU(), torch::nn::Linear(32, 2));
  policy->to(device);
  torch::optim::Adam optimizer(policy->parameters(), torch::optim::AdamOptions(1e-2));

  std::deque<double> recent;
  double best_mean = -1e9;
  double loss_window = 0;
  for (int episode = 1; episode <= 240; ++episode) {
    auto observation = env.reset();
    std::vector<torch::Tensor> log_probs;
    std::vector<double> rewards;
    bool done = false;
    while (!done) {
      auto probs = torch::softmax(policy->forward(observation.to(device)), -1);
      auto action = torch::multinomial(probs, 1);
      log_probs.push_back(torch::log(probs.gather(0, action)));
      Chain::Step step = env.step(action.item<int64_t>());
      rewards.push_back(step.reward);
      observation = step.observation;
      done = step.done;
    }
    std::vector<double> returns(rewards.size());
    double running = 0;
    for (int t = static_cast<int>(rewards.size()) - 1; t >= 0; --t) returns[t] = running = rewards[t] + 0.9 * running;
    auto loss = -(torch::cat(log_probs) * torch::tensor(returns, torch::kFloat).to(device)).mean();
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    loss_window += loss.item<double>();

    double episode_return = 0;
    for (double reward : rewards) episode_return += reward;
    recent.push_back(episode_return);
    if (recent.size() > 20) recent.pop_front();
    const double mean_return = std::accumulate(recent.begin(), recent.end(), 0.0) / recent.size();
    if (recent.size() == 20 && mean_return > best_mean) {
      best_mean = mean_return;
      torch::save(policy, "best_policy.pt");
    }
    if (episode % 40 == 0) {
      std::printf("episode %d loss %.4f reward %.3f\n", episode, loss_window / 40, mean_return);
      loss_window = 0;
    }
  }

  torch::nn::Sequential best(torch::nn::Linear(6, 32), torch::nn::ReLU(), torch::nn::Linear(32, 2));
  torch::load(best, "best_policy.pt");
  best->to(device);
  torch::NoGradGuard no_grad;
  auto observation = env.reset();
  int steps = 0;
  for (bool done = false; !done; ++steps) {
    Chain::Step step = env.step(best->forward(observation.to(device)).argmax().item<int64_t>());
    observation = step.observation;
    done = step.done;
  }
  std::printf("greedy steps %d best window %.3f\n", steps, best_mean);
  return 0;
}
