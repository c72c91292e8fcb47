// See precision.h.
#include "plugins/precision/precision.h"

#include <fabric/types.h>

#include "utilities/c10d_compat.h"

namespace fabric {

Autocast::Autocast(bool enabled, c10::DeviceType device_type, at::ScalarType dtype)
    : enabled_(enabled), device_type_(device_type) {
  if (!enabled_) return;
  namespace amp = detail::autocast_compat;
  previous_enabled_ = amp::is_enabled(device_type_);
  previous_dtype_ = amp::dtype(device_type_);
  amp::set_enabled(device_type_, true);
  amp::set_dtype(device_type_, dtype);
  at::autocast::increment_nesting();
}

Autocast::~Autocast() {
  if (!enabled_) return;
  namespace amp = detail::autocast_compat;
  // The cast weights are cached while any autocast scope is open.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  amp::set_enabled(device_type_, previous_enabled_);
  amp::set_dtype(device_type_, previous_dtype_);
}

namespace detail {

AutocastPause::AutocastPause(c10::DeviceType device_type)
    : device_type_(device_type), was_enabled_(autocast_compat::is_enabled(device_type)) {
  if (was_enabled_) autocast_compat::set_enabled(device_type_, false);
}

AutocastPause::~AutocastPause() {
  if (was_enabled_) autocast_compat::set_enabled(device_type_, true);
}

Precision::Precision(const Options& options, torch::Device device) : name_(options.precision()), device_(device) {
  if (name_ != "16-mixed") return;
  scaler_.active = true;
  scaler_.options = options.grad_scaler();
  scaler_.scale = scaler_.options.init_scale;
}

void Precision::convert_module(torch::nn::Module& module) const {
  // "*-true" precisions: the whole module in that dtype, as Lightning does.
  if (name_ == "64-true") {
    module.to(device_, torch::kDouble);
  } else if (name_ == "16-true") {
    module.to(device_, torch::kHalf);
  } else if (name_ == "bf16-true") {
    module.to(device_, torch::kBFloat16);
  } else {
    module.to(device_);
  }
}

bool Precision::autocasts() const {
  return name_ == "bf16-mixed" || (name_ == "16-mixed" && device_.type() == c10::DeviceType::CUDA);
}

at::ScalarType Precision::autocast_dtype() const {
  if (name_ == "bf16-mixed") return at::kBFloat16;
  return autocasts() ? at::kHalf : at::kFloat;
}

ScaledBackward::~ScaledBackward() {
  if (finished_) return;
  for (auto& [parameter, gradient] : set_aside_) {
    if (!parameter.grad().defined()) parameter.mutable_grad() = gradient;
  }
}

bool Precision::holds_unscaled_gradient(const at::Tensor& parameter) const {
  const auto found = unscaled_gradients_.find(parameter.unsafeGetTensorImpl());
  return found != unscaled_gradients_.end() && parameter.grad().defined() &&
         found->second.lock().get() == parameter.grad().unsafeGetTensorImpl();
}

ScaledBackward Precision::begin_scaled_backward(const std::vector<GradientsInBackward>& models) {
  ScaledBackward pass;
  for (const auto& model : models) {
    for (const auto& item : *model.parameters) {
      at::Tensor parameter = item.second;
      if (!holds_unscaled_gradient(parameter)) continue;
      const at::Tensor gradient = parameter.grad();
      if (model.synchronized) {
        pass.set_aside_.emplace_back(parameter, gradient);
        parameter.mutable_grad() = at::Tensor();
      } else {
        torch::NoGradGuard no_grad;
        gradient.mul_(scaler_.scale);
        unscaled_gradients_.erase(parameter.unsafeGetTensorImpl());
      }
    }
  }
  return pass;
}

bool Precision::finish_scaled_backward(ScaledBackward& pass, const std::vector<GradientsInBackward>& models,
                                       const std::function<bool(bool)>& agree_any) {
  std::vector<std::vector<at::Tensor>> synchronized_parameters;
  for (const auto& model : models) {
    if (!model.synchronized) continue;
    std::vector<at::Tensor> parameters;
    for (const auto& item : *model.parameters) parameters.push_back(item.second);
    synchronized_parameters.push_back(std::move(parameters));
  }
  const bool found_inf = unscale_and_update(synchronized_parameters, agree_any);
  // On inf/NaN the step is skipped: the earlier passes' share goes too.
  pass.finished_ = true;
  torch::NoGradGuard no_grad;
  for (auto& [parameter, earlier] : pass.set_aside_) {
    if (found_inf) continue;
    at::Tensor gradient = parameter.grad();
    if (gradient.defined()) earlier.add_(gradient);
    parameter.mutable_grad() = earlier;
  }
  for (const auto& parameters : synchronized_parameters) {
    for (const auto& parameter : parameters) {
      if (parameter.grad().defined()) {
        unscaled_gradients_.insert_or_assign(parameter.unsafeGetTensorImpl(), c10::weak_intrusive_ptr<c10::TensorImpl>(
                                                                                  parameter.grad().getIntrusivePtr()));
      } else {
        unscaled_gradients_.erase(parameter.unsafeGetTensorImpl());
      }
    }
  }
  // Entries of gradients gone (dropped by zero_grad, or of a model that was
  // destroyed).
  for (auto entry = unscaled_gradients_.begin(); entry != unscaled_gradients_.end();) {
    entry = entry->second.expired() ? unscaled_gradients_.erase(entry) : std::next(entry);
  }
  return found_inf;
}

bool Precision::unscale_and_update(const std::vector<std::vector<at::Tensor>>& synchronized_parameters,
                                   const std::function<bool(bool)>& agree_any) {
  // Gradients are reduced now (the Reducer finishes inside backward), so
  // with ddp every rank finds the same inf/NaN; under zero2 each rank holds
  // its own parameters' gradients and the ranks agree on the finding.
  // Micro-batches under no_backward_sync stay scaled until the backward that
  // reduces them.
  if (synchronized_parameters.empty()) return false;
  torch::NoGradGuard no_grad;
  const double inverse_scale = 1.0 / scaler_.scale;
  std::vector<at::Tensor> finite_flags;
  for (const auto& parameters : synchronized_parameters) {
    for (const auto& parameter : parameters) {
      at::Tensor grad = parameter.grad();
      if (!grad.defined()) continue;
      grad.mul_(inverse_scale);
      finite_flags.push_back(torch::isfinite(grad).all());
    }
  }
  const bool local_inf = !finite_flags.empty() && !torch::stack(finite_flags).all().item<bool>();
  const bool found_inf = agree_any(local_inf);
  auto& scaler = scaler_;
  if (found_inf) {
    // C++ optimizers skip parameters without a gradient entirely (no
    // update, no moment or step change): that is the skipped step.
    for (const auto& parameters : synchronized_parameters) {
      for (const auto& parameter : parameters) parameter.mutable_grad() = at::Tensor();
    }
    scaler.scale *= scaler.options.backoff_factor;
    scaler.growth_tracker = 0;
  } else if (++scaler.growth_tracker >= scaler.options.growth_interval) {
    scaler.scale *= scaler.options.growth_factor;
    scaler.growth_tracker = 0;
  }
  return found_inf;
}

}  // namespace detail

}  // namespace fabric
