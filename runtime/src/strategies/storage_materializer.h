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

  // Called on a resident group just before its memory is given back (the
  // kept tensors' too): fsdp copies its shard out of the whole parameters,
  // so values written into a resident group (a checkpoint being loaded)
  // survive the release. Its operators bring nothing back.
  using BeforeRelease = std::function<void(size_t group)>;

  explicit StorageMaterializer(Fill fill, BeforeRelease before_release = {});
  ~StorageMaterializer();
  StorageMaterializer(const StorageMaterializer&) = delete;
  StorageMaterializer& operator=(const StorageMaterializer&) = delete;

  // Registers tensors as one group (resident). Returns the group's number.
  // A tensor marked `kept` keeps its bytes when the group is released (the
  // shard this rank owns); reading it still brings the whole group back,
  // so that every rank runs the fill at the same operator.
  //
  // With `fill_allocates`, bringing the group back gives its storages no
  // memory: the fill must (set_data_ptr_noswap and set_nbytes on each
  // storage not kept), so that it can point them into one buffer it
  // gathered into, without a copy.
  size_t add_group(const std::vector<at::Tensor>& tensors, const std::vector<bool>& kept = {},
                   bool fill_allocates = false);
  // Which of the group's tensors (in add_group's order) keep their bytes
  // when it is released. On a released group a tensor can only stop being
  // kept (its bytes are given back now); bring the group back first to keep
  // more.
  void set_kept(size_t group, const std::vector<bool>& kept);
  // Gives the group's memory back (but the kept tensors'); its tensors keep
  // their sizes.
  void release(size_t group);
  void release_all();
  // When an operator brings a group back, every other resident group that
  // the operator does not read is released first: at most one group's
  // worth of memory is resident between operators (fsdp's reshard after
  // each unit's forward and backward).
  void set_release_others_on_demand(bool release);
  // Brings every group back and keeps them resident until unpin_all(),
  // which releases them: no operator releases a group meanwhile (release()
  // by the owner still does). For code that reads the memory without
  // operators (a checkpoint's writer).
  void pin_all();
  void unpin_all();
  // The fill cannot run any more: released groups stay released when this
  // object is destroyed (reading them fails) rather than get unfilled bytes.
  void abandon();
  // Brings the group back now (allocates, then fills), if released.
  void materialize(size_t group);
  void materialize_all();
  bool resident(size_t group) const;
  size_t groups() const;
  // How many times a group was brought back by an operator reading it.
  uint64_t materialized_on_demand() const;

  // While one exists on a thread, that thread's operators bring nothing
  // back: for code that reads only kept tensors (an optimizer stepping the
  // shards this rank owns) and must not start a collective fill.
  class Pause {
   public:
    Pause();
    ~Pause();
    Pause(const Pause&) = delete;
    Pause& operator=(const Pause&) = delete;

   private:
    bool outer_;
  };

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace detail
}  // namespace fabric
