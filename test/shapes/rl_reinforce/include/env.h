#pragma once
// A slippery 1-D corridor: cells 0 .. length-1, the goal at the right end.
// The agent starts in a random cell of the left half; each step moves it one
// cell left (action 0) or right (action 1), but with probability `slip` it
// moves the other way. Reaching the goal pays 1 and ends the episode; the
// episode is cut after max_steps otherwise.
#include <random>

#include <torch/torch.h>

struct StepResult {
  torch::Tensor observation;
  double reward;
  bool done;
};

class Env {
 public:
  explicit Env(unsigned seed, int length = 16, int max_steps = 48, double slip = 0.1);

  torch::Tensor reset();
  StepResult step(int64_t action);

  int observation_size() const { return length_; }
  int num_actions() const { return 2; }

 private:
  torch::Tensor observe() const;

  std::mt19937 gen_;
  std::uniform_real_distribution<double> unit_;
  int length_;
  int max_steps_;
  double slip_;
  int position_ = 0;
  int steps_ = 0;
};
