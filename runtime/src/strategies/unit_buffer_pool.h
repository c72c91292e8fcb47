// fsdp's unit-sized buffers (a unit gathered for its forward or backward,
// its gradients on their way to a reduce-scatter), kept for the next fill
// or reduce-scatter instead of freed.
//
// fsdp fixes glibc's mmap threshold at 1 MiB so that a released unit goes
// back to the system; every such buffer is then mapped, faulted in page by
// page and unmapped again, several times per step. On the 42M-parameter MLP
// bench that was about a third of the step's CPU time (perf: page faults,
// clearing pages, unmapping), more than its matrix products. A few buffers
// kept here (the most that are in use at once) cost a few units of memory
// and none of those faults. On CUDA the caching allocator already reuses
// memory: the pool hands out fresh tensors and keeps nothing.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace fabric {
namespace detail {

class UnitBufferPool : public std::enable_shared_from_this<UnitBufferPool> {
 public:
  // A buffer of at least `numel` elements (its first `numel` are the ones
  // to use), uninitialized.
  at::Tensor take(int64_t numel, const at::TensorOptions& options) {
    if (!options.device().is_cpu()) return at::empty({numel}, options);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // The smallest kept buffer that fits, of the same dtype, at most a
      // quarter larger (a unit's gathered values and its gradients with
      // their flags differ by a few elements).
      auto best = kept_.end();
      for (auto buffer = kept_.begin(); buffer != kept_.end(); ++buffer) {
        const int64_t size = buffer->numel();
        if (buffer->scalar_type() != options.dtype().toScalarType() || size < numel || size > numel + numel / 4)
          continue;
        if (best == kept_.end() || size < best->numel()) best = buffer;
      }
      if (best != kept_.end()) {
        at::Tensor buffer = std::move(*best);
        kept_.erase(best);
        return buffer;
      }
    }
    return at::empty({numel}, options);
  }

  // `buffer` (from take) is no longer used: kept for a later take, unless
  // the pool is full (then the oldest goes).
  void give_back(at::Tensor buffer) {
    if (!buffer.defined() || !buffer.device().is_cpu()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    kept_.push_back(std::move(buffer));
    if (kept_.size() > kKept) kept_.erase(kept_.begin());
  }

  // Several holders (the storages of a unit's parameters, all pointing into
  // one gathered buffer) share `buffer`; it goes back when the last lets go.
  // The holders may outlive the pool.
  std::shared_ptr<void> share(at::Tensor buffer) {
    std::weak_ptr<UnitBufferPool> pool = weak_from_this();
    return std::shared_ptr<void>(new at::Tensor(std::move(buffer)), [pool](void* held) {
      auto* tensor = static_cast<at::Tensor*>(held);
      if (auto alive = pool.lock()) alive->give_back(std::move(*tensor));
      delete tensor;
    });
  }

 private:
  // In use at once, at most: the unit being filled and the one released
  // after it, a reduce-scatter's buffer and what it receives.
  static constexpr size_t kKept = 4;
  std::mutex mutex_;
  std::vector<at::Tensor> kept_;
};

}  // namespace detail
}  // namespace fabric
