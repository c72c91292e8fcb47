// DQN on a small 1-D chase: the agent moves left, stays or moves right to
// stay close to a drifting target. Rewards are minus the distance after the
// move plus Gaussian noise. Episodes start from a fixed set of training
// scenarios (start positions and target speeds), drawn in shuffled batches
// of episodes run side by side. Experience replay, a target network
// refreshed every epoch, epsilon-greedy exploration; the best policy so far
// (by the average return of the epoch's episodes) is kept in best.pt.
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <limits>

namespace {

constexpr int64_t kObs = 4;
constexpr int64_t kActions = 3;
constexpr int kHorizon = 16;          // steps per episode
constexpr int64_t kCapacity = 2048;   // replay buffer
constexpr int kUpdatesPerRollout = 8;
constexpr double kGamma = 0.7;
constexpr double kRewardNoise = 0.3;

// ---------------------------------------------------------------------------
// A scenario: where the agent and the target start, and the target's speed.
class ScenarioSet : public torch::data::datasets::Dataset<ScenarioSet> {
 public:
  explicit ScenarioSet(int64_t n)
      : scenarios_(torch::stack({torch::rand({n}) * 2 - 1, torch::rand({n}) * 2 - 1,
                                 (torch::rand({n}) - 0.5) * 0.12},
                                1)) {}
  torch::data::Example<> get(size_t i) override { return {scenarios_[i], torch::zeros({})}; }
  torch::optional<size_t> size() const override { return scenarios_.size(0); }

 private:
  torch::Tensor scenarios_;
};

// Environment: one episode per scenario, stepped together.
class ChaseEnv {
 public:
  torch::Tensor reset(const torch::Tensor& scenarios) {
    n_ = scenarios.size(0);
    agent_ = scenarios.select(1, 0).clone();
    target_ = scenarios.select(1, 1).clone();
    velocity_ = scenarios.select(1, 2).clone();
    t_ = 0;
    return observe();
  }

  struct Step {
    torch::Tensor obs, reward, done;
  };

  Step step(const torch::Tensor& action) {
    agent_ = torch::clamp(agent_ + (action.to(torch::kFloat) - 1) * 0.2, -1.2, 1.2);
    target_ = target_ + velocity_;
    auto out = target_.abs() > 1.0;
    velocity_ = torch::where(out, -velocity_, velocity_);
    target_ = torch::clamp(target_, -1.0, 1.0);
    auto reward = -(agent_ - target_).abs() + kRewardNoise * torch::randn({n_});
    ++t_;
    auto done = torch::full({n_}, t_ >= kHorizon ? 1.0f : 0.0f);
    return {observe(), reward, done};
  }

  bool finished() const { return t_ >= kHorizon; }

 private:
  torch::Tensor observe() const {
    return torch::stack({agent_, target_, target_ - agent_, velocity_ * 10}, 1);
  }

  int64_t n_ = 0;
  int t_ = 0;
  torch::Tensor agent_, target_, velocity_;
};

// ---------------------------------------------------------------------------
struct QNetImpl : torch::nn::Module {
  QNetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(kObs, 64));
    fc2 = register_module("fc2", torch::nn::Linear(64, 64));
    out = register_module("out", torch::nn::Linear(64, kActions));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(fc1->forward(x));
    x = torch::relu(fc2->forward(x));
    return out->forward(x);
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, out{nullptr};
};
TORCH_MODULE(QNet);

class ReplayBuffer {
 public:
  ReplayBuffer(int64_t capacity, torch::Device device)
      : capacity_(capacity),
        obs_(torch::zeros({capacity, kObs}, device)),
        next_obs_(torch::zeros({capacity, kObs}, device)),
        action_(torch::zeros({capacity}, torch::TensorOptions().dtype(torch::kLong).device(device))),
        reward_(torch::zeros({capacity}, device)),
        done_(torch::zeros({capacity}, device)) {}

  void push(const torch::Tensor& obs, const torch::Tensor& action, const torch::Tensor& reward,
            const torch::Tensor& next_obs, const torch::Tensor& done) {
    const int64_t n = obs.size(0);
    auto index = torch::arange(next_, next_ + n, torch::kLong).remainder(capacity_).to(obs_.device());
    obs_.index_copy_(0, index, obs);
    next_obs_.index_copy_(0, index, next_obs);
    action_.index_copy_(0, index, action);
    reward_.index_copy_(0, index, reward);
    done_.index_copy_(0, index, done);
    next_ = (next_ + n) % capacity_;
    size_ = std::min(capacity_, size_ + n);
  }

  struct Batch {
    torch::Tensor obs, action, reward, next_obs, done;
  };

  Batch sample(int64_t batch_size) const {
    auto idx = torch::randint(0, size_, {batch_size}, torch::kLong).to(obs_.device());
    return {obs_.index_select(0, idx), action_.index_select(0, idx), reward_.index_select(0, idx),
            next_obs_.index_select(0, idx), done_.index_select(0, idx)};
  }

  int64_t size() const { return size_; }

 private:
  int64_t capacity_;
  int64_t next_ = 0;
  int64_t size_ = 0;
  torch::Tensor obs_, next_obs_, action_, reward_, done_;
};

void hard_update(QNet& target, QNet& source) {
  torch::NoGradGuard no_grad;
  auto dst = target->parameters();
  auto src = source->parameters();
  for (size_t i = 0; i < dst.size(); ++i) dst[i].copy_(src[i]);
}

torch::Tensor td_target(QNet& target_net, const torch::Tensor& reward, const torch::Tensor& next_obs,
                        const torch::Tensor& done) {
  torch::NoGradGuard no_grad;
  auto next_q = std::get<0>(target_net->forward(next_obs).max(1));
  return reward + kGamma * (1 - done) * next_q;
}

}  // namespace

int main() {
  torch::manual_seed(31);
  const torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  const int epochs = 12;
  const int64_t episodes_per_batch = 64;
  const int64_t batch_size = 64;  // replayed transitions per update

  auto scenarios = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      ScenarioSet(512).map(torch::data::transforms::Stack<>()), episodes_per_batch);
  auto test_scenarios = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      ScenarioSet(256).map(torch::data::transforms::Stack<>()), 128);

  QNet policy;
  QNet target_net;
  policy->to(device);
  target_net->to(device);
  hard_update(target_net, policy);
  for (auto& p : target_net->parameters()) p.requires_grad_(false);

  torch::optim::Adam optimizer(policy->parameters(), torch::optim::AdamOptions(1e-3));
  ReplayBuffer buffer(kCapacity, device);
  ChaseEnv env;

  double best_reward = -std::numeric_limits<double>::infinity();
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const double epsilon = std::max(0.05, 1.0 - (epoch - 1) / 6.0);
    double return_sum = 0.0, loss_sum = 0.0;
    int64_t episodes = 0, updates = 0;
    for (auto& batch : *scenarios) {
      // Collect: one episode per scenario with the current policy.
      policy->eval();
      auto obs = env.reset(batch.data).to(device);
      const int64_t n = obs.size(0);
      auto returns = torch::zeros({n}, device);
      while (!env.finished()) {
        torch::Tensor action;
        {
          torch::NoGradGuard no_grad;
          auto greedy = policy->forward(obs).argmax(1);
          auto random = torch::randint(0, kActions, {n}, torch::kLong).to(device);
          auto explore = (torch::rand({n}) < epsilon).to(device);
          action = torch::where(explore, random, greedy);
        }
        auto step = env.step(action.cpu());
        auto next_obs = step.obs.to(device);
        auto reward = step.reward.to(device);
        buffer.push(obs, action, reward, next_obs, step.done.to(device));
        returns += reward;
        obs = next_obs;
      }
      return_sum += returns.sum().item<double>();
      episodes += n;

      // Learn from replayed transitions.
      policy->train();
      for (int u = 0; u < kUpdatesPerRollout; ++u) {
        auto sample = buffer.sample(batch_size);
        auto q = policy->forward(sample.obs).gather(1, sample.action.unsqueeze(1)).squeeze(1);
        auto target = td_target(target_net, sample.reward, sample.next_obs, sample.done);
        auto loss = torch::mse_loss(q, target);
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
        loss_sum += loss.item<double>();
        ++updates;
      }
    }
    hard_update(target_net, policy);

    const double avg_reward = return_sum / episodes;
    std::printf("epoch %d loss %.4f reward %.3f epsilon %.2f\n", epoch, loss_sum / updates, avg_reward, epsilon);
    if (avg_reward > best_reward) {
      best_reward = avg_reward;
      torch::save(policy, "best.pt");
    }
  }

  // Evaluate the best policy greedily on held-out scenarios.
  QNet best;
  torch::load(best, "best.pt");
  best->to(device);
  best->eval();
  torch::NoGradGuard no_grad;
  double td_sum = 0.0, return_sum = 0.0;
  int64_t transitions = 0, episodes = 0;
  for (auto& batch : *test_scenarios) {
    auto obs = env.reset(batch.data).to(device);
    const int64_t n = obs.size(0);
    while (!env.finished()) {
      auto q = best->forward(obs);
      auto action = q.argmax(1);
      auto step = env.step(action.cpu());
      auto next_obs = step.obs.to(device);
      auto reward = step.reward.to(device);
      auto target = reward + kGamma * (1 - step.done.to(device)) * std::get<0>(best->forward(next_obs).max(1));
      td_sum += torch::mse_loss(q.gather(1, action.unsqueeze(1)).squeeze(1), target, torch::Reduction::Sum)
                    .item<double>();
      return_sum += reward.sum().item<double>();
      transitions += n;
      obs = next_obs;
    }
    episodes += n;
  }
  std::printf("best train reward %.3f\n", best_reward);
  std::printf("test loss %.4f reward %.3f\n", td_sum / transitions, return_sum / episodes);
  return 0;
}
