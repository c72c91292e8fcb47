// Parameters whose memory is given back between uses, and brought back by
// the first operator that reads them: the trigger the `fsdp` strategy needs
// (a unit's parameters all-gathered just before its forward, and again for
// its backward) on modules as users write them.
//
// C++ modules have no forward hooks, and a parent's forward calls its
// children through its own members (a holder, a by-value member, a
// Sequential), so no wrapper Fabric installs is ever called. What every
// read of a parameter does go through is the dispatcher: `F::linear(x,
// weight)` in a forward, `mm(grad, weight.t())` in an autograd node. A
// RecordFunction callback (LibTorch's profiling hook, in 1.13 and 2.x) sees
// each operator's inputs before its kernel runs; a released parameter among
// them (its StorageImpl: a view such as `weight.t()` saved for backward
// shares it) has its group materialized right there.
//
// Released means the storage keeps its identity, sizes and strides but holds
// no bytes (nbytes 0): every tensor and view of it, the ones autograd saved
// included, sees the bytes again once the group is materialized.
//
// Trade-offs (docs/runtime.md "Sharded parameters"): every operator pays
// for the callback while a group is registered, its inputs boxed; code that
// reads a parameter's memory without an operator (`param.data_ptr<float>()`
// in a hand-written kernel) must materialize it first (materialize_all()).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace fabric {
namespace detail {

class StorageMaterializer {
 public:
  // Fills the group's tensors, whose storages have been given their bytes
  // back (uninitialized): an all-gather of the shards, a copy. Runs on the
  // thread of the operator that needs them, before its kernel.
  using Fill = std::function<void(size_t group)>;

  explicit StorageMaterializer(Fill fill);
  ~StorageMaterializer();
  StorageMaterializer(const StorageMaterializer&) = delete;
  StorageMaterializer& operator=(const StorageMaterializer&) = delete;

  // Registers tensors as one group (resident). Returns the group's number.
  size_t add_group(const std::vector<at::Tensor>& tensors);
  // Gives the group's memory back; its tensors keep their sizes.
  void release(size_t group);
  // Brings the group back now (allocates, then fills), if released.
  void materialize(size_t group);
  void materialize_all();
  bool resident(size_t group) const;
  size_t groups() const;
  // How many times a group was brought back by an operator reading it.
  uint64_t materialized_on_demand() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace detail
}  // namespace fabric
