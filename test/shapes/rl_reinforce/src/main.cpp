// REINFORCE on the slippery corridor: one episode per update, discounted
// returns, loss = -sum_t log pi(a_t|s_t) G_t / T.
#include <cstdio>
#include <vector>

#include <torch/torch.h>

#include "env.h"
#include "policy.h"

int main() {
  torch::manual_seed(11);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  Env env(7);
  Policy policy(env.observation_size(), 32, env.num_actions());
  policy->to(device);
  torch::optim::Adam optimizer(policy->parameters(), torch::optim::AdamOptions(5e-3));

  const int num_episodes = 400;
  const int log_every = 25;
  const double gamma = 0.95;

  double loss_window = 0, reward_window = 0, length_window = 0;
  for (int episode = 1; episode <= num_episodes; ++episode) {
    auto obs = env.reset();
    std::vector<torch::Tensor> log_probs;
    std::vector<double> rewards;
    bool done = false;
    while (!done) {
      auto probs = policy->forward(obs.to(device));
      auto action = torch::multinomial(probs, 1);
      log_probs.push_back(torch::log(probs.gather(0, action)));
      StepResult result = env.step(action.item<int64_t>());
      rewards.push_back(result.reward);
      obs = result.observation;
      done = result.done;
    }

    // Discounted returns, from the last step back.
    std::vector<double> returns(rewards.size());
    double running = 0;
    for (int t = static_cast<int>(rewards.size()) - 1; t >= 0; --t) {
      running = rewards[t] + gamma * running;
      returns[t] = running;
    }
    auto G = torch::tensor(returns, torch::kFloat).to(device);
    auto loss = -(torch::cat(log_probs) * G).mean();

    optimizer.zero_grad();
    loss.backward();
    optimizer.step();

    double episode_reward = 0;
    for (double r : rewards) episode_reward += r;
    loss_window += loss.item<double>();
    reward_window += episode_reward;
    length_window += rewards.size();
    if (episode % log_every == 0) {
      std::printf("episode %d loss %.4f reward %.3f length %.1f\n", episode, loss_window / log_every,
                  reward_window / log_every, length_window / log_every);
      loss_window = reward_window = length_window = 0;
    }
  }

  // Greedy evaluation from every start cell of the left half.
  torch::NoGradGuard no_grad;
  double total_length = 0;
  int reached = 0;
  const int eval_episodes = 20;
  for (int k = 0; k < eval_episodes; ++k) {
    auto obs = env.reset();
    bool done = false;
    int length = 0;
    double reward = 0;
    while (!done) {
      auto action = policy->forward(obs.to(device)).argmax().item<int64_t>();
      StepResult result = env.step(action);
      obs = result.observation;
      done = result.done;
      reward += result.reward;
      ++length;
    }
    reached += reward > 0 ? 1 : 0;
    total_length += length;
  }
  std::printf("greedy reached %d/%d mean length %.2f\n", reached, eval_episodes, total_length / eval_episodes);
  return 0;
}
