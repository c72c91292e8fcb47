#include "env.h"

#include <algorithm>

Env::Env(unsigned seed, int length, int max_steps, double slip)
    : gen_(seed), unit_(0.0, 1.0), length_(length), max_steps_(max_steps), slip_(slip) {}

torch::Tensor Env::reset() {
  std::uniform_int_distribution<int> start(0, length_ / 2 - 1);
  position_ = start(gen_);
  steps_ = 0;
  return observe();
}

StepResult Env::step(int64_t action) {
  int move = action == 1 ? 1 : -1;
  if (unit_(gen_) < slip_) {
    move = -move;
  }
  position_ = std::clamp(position_ + move, 0, length_ - 1);
  ++steps_;
  const bool reached = position_ == length_ - 1;
  const bool done = reached || steps_ >= max_steps_;
  return {observe(), reached ? 1.0 : 0.0, done};
}

// One-hot position.
torch::Tensor Env::observe() const {
  auto obs = torch::zeros({length_});
  obs[position_] = 1.0;
  return obs;
}
