// Tells a strategy when autograd has accumulated a parameter's gradient:
// a post hook on the parameter's AccumulateGrad node, which runs once per
// backward pass that reaches the parameter, right after its gradient is
// written. zero2 launches a bucket's reduction from it, fsdp a unit's
// reduce-scatter.
//
// The hooks stay on the nodes (LibTorch has no way to take one off that
// both 1.13 and 2.x share), so they call through a target the owner clears
// when it is destroyed: a hook that outlives its strategy does nothing.
#pragma once

#include <torch/csrc/autograd/function_hook.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace fabric {
namespace detail {

class AccumulationHooks {
 public:
  // `accumulated(key)` runs on the thread running the backward pass.
  explicit AccumulationHooks(std::function<void(size_t key)> accumulated)
      : target_(std::make_shared<Target>(Target{std::move(accumulated)})) {}
  ~AccumulationHooks() { target_->accumulated = nullptr; }
  AccumulationHooks(const AccumulationHooks&) = delete;
  AccumulationHooks& operator=(const AccumulationHooks&) = delete;

  // From now on, every backward pass that accumulates into `parameter`
  // calls accumulated(key).
  void add(const at::Tensor& parameter, size_t key) {
    auto accumulator = torch::autograd::impl::grad_accumulator(parameter);
    accumulator->add_post_hook(std::make_unique<Hook>(target_, key));
    accumulators_.push_back(std::move(accumulator));  // the tensor holds its node only weakly
  }

 private:
  struct Target {
    std::function<void(size_t)> accumulated;
  };
  class Hook : public torch::autograd::FunctionPostHook {
   public:
    Hook(std::weak_ptr<Target> target, size_t key) : target_(std::move(target)), key_(key) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                              const torch::autograd::variable_list& inputs) override {
      (void)inputs;
      if (auto target = target_.lock()) {
        if (target->accumulated) target->accumulated(key_);
      }
      return outputs;
    }

   private:
    std::weak_ptr<Target> target_;
    size_t key_;
  };

  std::shared_ptr<Target> target_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
};

}  // namespace detail
}  // namespace fabric
