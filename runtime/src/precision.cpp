// Precision (precision.h): "*-true" casts, autocast scopes, the loss scaler.
#include <fabric/fabric.h>

#include "fabric_state.h"
#include "precision.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace fabric {

double Fabric::loss_scale() const { return state_->scaler.active ? state_->scaler.scale : 1.0; }

Autocast Fabric::autocast() {
  const c10::DeviceType device_type = state_->device.type();
  const std::string& precision = state_->options.precision();
  if (precision == "bf16-mixed") return Autocast(true, device_type, at::kBFloat16);
  if (precision == "16-mixed" && device_type == c10::DeviceType::CUDA) {
    return Autocast(true, device_type, at::kHalf);
  }
  return Autocast(false, device_type, at::kFloat);
}

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

void start_loss_scaler(FabricState::LossScaler& scaler, const Options& options) {
  if (options.precision() != "16-mixed") return;
  scaler.active = true;
  scaler.options = options.grad_scaler();
  scaler.scale = scaler.options.init_scale;
}

void move_to_device_and_precision(torch::nn::Module& module, const torch::Device& device,
                                  const std::string& precision) {
  // "*-true" precisions: the whole module in that dtype, as Lightning does.
  if (precision == "64-true") {
    module.to(device, torch::kDouble);
  } else if (precision == "16-true") {
    module.to(device, torch::kHalf);
  } else if (precision == "bf16-true") {
    module.to(device, torch::kBFloat16);
  } else {
    module.to(device);
  }
}

void unscale_and_update(FabricState& state, const std::vector<std::vector<at::Tensor>>& synchronized_parameters) {
  // Gradients are reduced now (the Reducer finishes inside backward), so
  // with ddp every rank finds the same inf/NaN; under zero2 each rank holds
  // its own parameters' gradients and the ranks agree on the finding.
  // Micro-batches under no_backward_sync stay scaled until the backward that
  // reduces them.
  if (synchronized_parameters.empty()) return;
  torch::NoGradGuard no_grad;
  const double inverse_scale = 1.0 / state.scaler.scale;
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
  const bool found_inf =
      state.collective("fabric.backward() (loss scaler)", [&] { return state.strategy->agree_any(local_inf); });
  auto& scaler = state.scaler;
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
}

}  // namespace detail

}  // namespace fabric
