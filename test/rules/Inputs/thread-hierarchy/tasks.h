#pragma once
#include "base_trainer.h"

// A task with a constructor of its own (declared here, defined in
// tasks.cpp) and a mixin base.
class ClassifierTrainer : public BaseTrainer, public Named {
 public:
  ClassifierTrainer(Net model, double lr);

 protected:
  double train_epoch() override;
};

// A task that inherits the base's constructors.
class RegressorTrainer : public BaseTrainer {
 public:
  using BaseTrainer::BaseTrainer;

 protected:
  double train_epoch() override;
};

// One level further down, defined inline: its direct base hands it on.
class FineTuner : public ClassifierTrainer {
 public:
  explicit FineTuner(Net model) : ClassifierTrainer(model, 0.01) {}
};

// A base that keeps its optimizer private: a derived class cannot name a
// Fabric member beside it, so nothing is threaded through it (its own
// training code would be reported; it has none here).
class Sealed {
 public:
  explicit Sealed(Net model) : model_(model), optimizer_(model_->parameters(), torch::optim::SGDOptions(0.1)) {}
  void step() { optimizer_.step(); }

 private:
  Net model_;
  torch::optim::SGD optimizer_;
};
class Unsealed : public Sealed {
 public:
  explicit Unsealed(Net model) : Sealed(model) {}
};

// A task with an optimizer of its own over a base that keeps one: both
// get the Fabric, the base through the task's constructor.
class TwoOptimizers : public BaseTrainer {
 public:
  TwoOptimizers(Net model, Net head) : BaseTrainer(model, 0.1), head_(head), head_optimizer_(head_->parameters(), 0.01) {}

 protected:
  double train_epoch() override;

 private:
  Net head_;
  torch::optim::SGD head_optimizer_;
};

// A scheduler of the program's own over LibTorch's: LibTorch's base holds
// the optimizer, but it is no trainer the Fabric goes into.
class WarmupLR : public torch::optim::LRScheduler {
 public:
  WarmupLR(torch::optim::Optimizer& optimizer, int warmup) : LRScheduler(optimizer), warmup_(warmup) {}

 private:
  std::vector<double> get_lrs() override { return {0.1 * step_count_ / warmup_}; }
  int warmup_;
};
