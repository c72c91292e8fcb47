// What a Fabric keeps for the data the program reads itself
// (fabric/data_sharding.h): the loop sites of shard_range and
// shard_elements, this rank's own random streams (per_rank_random), the
// duplicate-data check of backward, and which Fabric the free functions
// (fabric::shard, fabric::global_rank...) use. Internal.
#pragma once

#include <fabric/data_sharding.h>
#include <fabric/types.h>

#include "plugins/io/checkpoint_format.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fabric {
namespace detail {

// This rank's own streams of LibTorch's default generators (CPU, and the
// rank's CUDA device), swapped in by the outermost PerRankRandom guard and
// out again when it ends. Seeded on first use from the shared generator's
// seed and the global rank.
class PerRankStreams {
 public:
  PerRankStreams(int global_rank, torch::Device device) : global_rank_(global_rank), device_(device) {}

  void enter();
  void leave();
  // The shared and own streams as they are now, inside a guard or not.
  LocalGeneratorStates states() const;
  // Puts them back (fabric.load of a RandomState): the shared streams into
  // the generators (or, inside a guard, where it restores them from), the
  // own ones where the next guard takes them.
  void restore(const LocalGeneratorStates& states);

 private:
  int global_rank_;
  torch::Device device_;
  int depth_ = 0;  // guards alive; the outermost one swaps
  // While a guard lives: the shared streams it puts back. Otherwise: this
  // rank's own streams (undefined until first used).
  torch::Tensor shared_cpu_, shared_cuda_;
  torch::Tensor own_cpu_, own_cuda_;
};

// Fabric::backward with several processes: at the 3rd, 5th, 9th, 17th, ...
// backward pass that synchronized gradients (every rank runs as many, also
// under no_backward_sync), the ranks compare their loss (one all-reduce of three doubles). Three
// passes at which every rank's loss was bit-identical (not zero, not all
// the same value) mean the ranks train on the same batches: rank 0 says so
// once. The first pass at which the ranks differ ends the checks.
class DuplicateDataCheck {
 public:
  bool due(uint64_t synchronization) const { return !decided_ && synchronization == next_pass_; }
  // `reduce` all-reduces with ReduceOp::Max on every rank.
  void check(Fabric& fabric, const at::Tensor& loss, uint64_t synchronization,
             const std::function<at::Tensor(const at::Tensor&)>& reduce);

 private:
  uint64_t next_pass_ = 3;
  bool decided_ = false;
  std::vector<std::pair<uint64_t, double>> identical_;  // (pass, loss) where every rank had that loss
};

class DataSharding {
 public:
  DataSharding(Fabric& fabric, int world_size, int global_rank, torch::Device device);
  ~DataSharding();
  DataSharding(const DataSharding&) = delete;
  DataSharding& operator=(const DataSharding&) = delete;

  // Fabric::launch(): runs `start` (the strategy's launch). Another Fabric
  // launched in this process is an error, before this one starts anything;
  // once launched, this one is the Fabric the free functions use.
  void launch(const std::function<void()>& start);

  // The shared state of the loop at file:line.
  std::shared_ptr<ShareSite> site(const char* file, int line);

  PerRankStreams streams;
  DuplicateDataCheck duplicates;

 private:
  Fabric& fabric_;
  int world_size_;
  std::unordered_map<std::string, std::shared_ptr<ShareSite>> sites_;
};

}  // namespace detail
}  // namespace fabric
