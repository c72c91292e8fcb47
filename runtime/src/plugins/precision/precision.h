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
#include <vector>

namespace fabric {
namespace detail {

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

  // After a scaled backward: unscales the gradients of the parameters that
  // were synchronized; `agree_any` (the strategy's, a collective where
  // gradients are sharded) makes one rank's inf/NaN every rank's. Then skips
  // the step (drops the gradients) and backs off, or grows the scale after
  // growth_interval clean steps. Returns whether an inf/NaN was found.
  bool unscale_and_update(const std::vector<std::vector<at::Tensor>>& synchronized_parameters,
                          const std::function<bool(bool)>& agree_any);

 private:
  std::string name_;
  torch::Device device_;
  LossScaler scaler_;
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
