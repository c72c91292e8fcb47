// See gradient_read_hint.h.
#include "strategies/gradient_read_hint.h"

#include "utilities/messages.h"

#include <ATen/record_function.h>

#include <atomic>
#include <mutex>
#include <type_traits>

namespace fabric {
namespace detail {
namespace {

static_assert(std::is_same<at::CallbackHandle, uint64_t>::value && at::INVALID_CALLBACK_HANDLE == 0,
              "GradientReadHint keeps the handle as uint64_t, 0 for none");

std::mutex hint_mutex;
std::string armed_strategy;  // guarded by hint_mutex
std::atomic<bool> hint_said{false};

std::unique_ptr<at::ObserverContext> on_operator_start(const at::RecordFunction& call) {
  if (hint_said.load(std::memory_order_relaxed)) return nullptr;
  const auto inputs = call.inputs();
  if (inputs.empty() || !inputs[0].isTensor() || inputs[0].toTensor().defined()) return nullptr;
  std::string strategy;
  {
    std::lock_guard<std::mutex> lock(hint_mutex);
    strategy = armed_strategy;
  }
  if (strategy.empty() || hint_said.exchange(true)) return nullptr;
  write_stderr_line(
      std::string("fabric: ") + call.name() +
      " was given an undefined tensor between fabric.backward and fabric.step under strategy '" + strategy +
      "', where each rank holds only its share of the averaged gradients: a parameter this rank "
      "owns none of has no .grad() here (PyTorch's FSDP leaves p.grad None the same way). To read "
      "the gradients' total norm use fabric.clip_gradients(model, optimizer, c10::nullopt, max_norm), which "
      "combines the ranks' shares; or train with strategy 'ddp' or 'zero1', which keep every "
      "gradient whole (docs/runtime.md, \"Gradients under the sharded strategies\")");
  return nullptr;
}

}  // namespace

void GradientReadHint::arm() {
  if (handle_ != 0 || hint_said.load(std::memory_order_relaxed)) return;
  {
    std::lock_guard<std::mutex> lock(hint_mutex);
    armed_strategy = strategy_;
  }
  // Operators only; the program's code between backward and step is
  // usually a few of them, so the boxed inputs cost little.
  handle_ = at::addGlobalCallback(
      at::RecordFunctionCallback(&on_operator_start).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
}

void GradientReadHint::disarm() {
  if (handle_ == 0) return;
  at::removeCallback(handle_);
  handle_ = 0;
  std::lock_guard<std::mutex> lock(hint_mutex);
  armed_strategy.clear();
}

}  // namespace detail
}  // namespace fabric
