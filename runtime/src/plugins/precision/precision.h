// The precision plugin: what each Options::precision does to a model, to the
// loss and to the gradients. "*-true" casts the whole model; "bf16-mixed" and
// "16-mixed" autocast the forward (fabric.autocast()); "16-mixed" scales the
// loss and unscales the gradients (PyTorch's GradScaler rules, in plain
// tensor ops: 1.13 has no CPU kernels for its fused ones). Owned by the
// strategy.
#pragma once

#include <fabric/options.h>

#include <torch/torch.h>

#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fabric {
namespace detail {

using NamedParameters = std::vector<std::pair<std::string, at::Tensor>>;

// A set-up model's parameters in one backward, and whether that backward
// synchronizes their gradients (not under no_backward_sync).
struct GradientsInBackward {
  const NamedParameters* parameters;
  bool synchronized;
};

// One scaled backward's gradient bookkeeping (Precision::begin_scaled_backward):
// the gradients an earlier synchronized pass unscaled, set aside while this
// pass adds its scaled ones. A backward that throws gives them back when
// this goes.
class ScaledBackward {
 public:
  ScaledBackward() = default;
  ScaledBackward(ScaledBackward&&) = default;
  ScaledBackward& operator=(ScaledBackward&&) = delete;
  ScaledBackward(const ScaledBackward&) = delete;
  ScaledBackward& operator=(const ScaledBackward&) = delete;
  ~ScaledBackward();

 private:
  friend class Precision;
  std::vector<std::pair<at::Tensor, at::Tensor>> set_aside_;  // (parameter, its unscaled gradient)
  bool finished_ = false;
};

// "16-mixed": PyTorch's GradScaler's state.
struct LossScaler {
  bool active = false;
  double scale = 1.0;
  int64_t growth_tracker = 0;  // clean steps since the last change
  Options::GradScalerOptions options;
};

class Precision {
 public:
  Precision(const Options& options, torch::Device device);

  // Module::to(device) and, for "*-true" precisions, the dtype.
  void convert_module(torch::nn::Module& module) const;
  // Whether fabric.autocast() opens a scope, and in which dtype.
  bool autocasts() const;
  at::ScalarType autocast_dtype() const;

  // The loss scaler of "16-mixed" (inactive otherwise); a checkpoint saves
  // and loads its state.
  const LossScaler& scaler() const { return scaler_; }
  LossScaler& scaler() { return scaler_; }
  bool scales_loss() const { return scaler_.active; }
  // fabric.loss_scale(): 1 unless the loss is scaled.
  double loss_scale() const { return scaler_.active ? scaler_.scale : 1.0; }

  // The loss a scaled backward starts from.
  at::Tensor scale(const at::Tensor& loss) const { return loss * scaler_.scale; }
  // Before a scaled backward that reaches `models`. A gradient accumulated
  // over several backward passes (no zero_grad between) is unscaled once:
  // what an earlier synchronized pass unscaled is set aside during this one
  // and added back after its unscaling; before a pass under
  // no_backward_sync it is scaled again, as the sum it joins is.
  ScaledBackward begin_scaled_backward(const std::vector<GradientsInBackward>& models);
  // After it (gradients are reduced now: the Reducer finishes inside
  // backward): unscales the synchronized gradients (unscale_and_update),
  // adds back what `pass` set aside, and remembers which gradients are
  // unscaled. Returns whether an inf/NaN was found (the step is skipped).
  bool finish_scaled_backward(ScaledBackward& pass, const std::vector<GradientsInBackward>& models,
                              const std::function<bool(bool)>& agree_any);

  // After a scaled backward: unscales the gradients of the parameters that
  // were synchronized; `agree_any` (the strategy's, a collective where
  // gradients are sharded) makes one rank's inf/NaN every rank's. Then skips
  // the step (drops the gradients) and backs off, or grows the scale after
  // growth_interval clean steps. Returns whether an inf/NaN was found.
  bool unscale_and_update(const std::vector<std::vector<at::Tensor>>& synchronized_parameters,
                          const std::function<bool(bool)>& agree_any);

 private:
  // Whether `parameter`'s gradient is the one a synchronized backward
  // unscaled (not a scaled sum of micro-batches since).
  bool holds_unscaled_gradient(const at::Tensor& parameter) const;
  std::string name_;
  torch::Device device_;
  LossScaler scaler_;
  // Per parameter, the gradient tensor a synchronized backward unscaled
  // (weakly: a zero_grad that drops it, or a new gradient, makes the entry
  // stale). Other gradients hold scaled sums of micro-batches under
  // no_backward_sync.
  std::unordered_map<const c10::TensorImpl*, c10::weak_intrusive_ptr<c10::TensorImpl>> unscaled_gradients_;
};

// While alive, autocast is off for `device_type` (restored after): the
// backward pass runs in the dtypes its forward ops chose.
class AutocastPause {
 public:
  explicit AutocastPause(c10::DeviceType device_type);
  ~AutocastPause();
  AutocastPause(const AutocastPause&) = delete;
  AutocastPause& operator=(const AutocastPause&) = delete;

 private:
  c10::DeviceType device_type_;
  bool was_enabled_;
};

}  // namespace detail
}  // namespace fabric
