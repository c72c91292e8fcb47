// Precision: what each Options::precision does to a model, to the loss and
// to the gradients. "*-true" casts the whole model; "bf16-mixed" and
// "16-mixed" autocast the forward (fabric.autocast()); "16-mixed" scales the
// loss and unscales the gradients (PyTorch's GradScaler rules, in plain
// tensor ops: 1.13 has no CPU kernels for its fused ones).
#pragma once

#include <fabric/options.h>

#include <torch/torch.h>

#include <string>
#include <vector>

namespace fabric {
namespace detail {

class FabricState;

// Module::to(device) and, for "*-true" precisions, the dtype.
void move_to_device_and_precision(torch::nn::Module& module, const torch::Device& device, const std::string& precision);

// After a scaled backward: unscales the gradients of the parameters that
// were synchronized, agrees with the other ranks whether any is inf/NaN,
// then skips the step (drops the gradients) and backs off, or grows the
// scale after growth_interval clean steps.
void unscale_and_update(FabricState& state, const std::vector<std::vector<at::Tensor>>& synchronized_parameters);

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
