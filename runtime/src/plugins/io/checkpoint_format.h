// The archive layout of fabric::State checkpoints, shared by the one-file
// format (checkpoints.cpp) and fsdp's sharded one (sharded_checkpoints.cpp).
// Internal: not installed.
#pragma once

#include <fabric/types.h>

#include "plugins/collectives/collectives.h"
#include "plugins/precision/precision.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace fabric {
namespace detail {

// Archive keys. Entry names are the user's and may hold any character, but
// archive keys become module attribute names (no dots), so entries are
// stored under their index and the names kept in a list.
constexpr const char* kFormatKey = "fabric_state_format";
constexpr int64_t kFormatVersion = 1;
constexpr const char* kNamesKey = "fabric_state_names";
constexpr const char* kKindsKey = "fabric_state_kinds";
inline std::string entry_key(size_t index) { return "entry" + std::to_string(index); }
constexpr const char* kScaleKey = "fabric_loss_scale";
constexpr const char* kGrowthTrackerKey = "fabric_loss_scale_growth_tracker";

// The list of strings at `key`; a CheckpointError naming `path` when absent.
std::vector<std::string> read_string_list(torch::serialize::InputArchive& archive, const char* key,
                                          const std::string& path);

// LRScheduler keeps its step count protected; a derived class may name it.
struct SchedulerSteps : torch::optim::LRScheduler {
  static unsigned& of(torch::optim::LRScheduler& scheduler) { return scheduler.*(&SchedulerSteps::step_count_); }
};

// This rank's default generators as a fabric::RandomState saves them: the
// streams every rank draws in lockstep, and this rank's own streams
// (Fabric::per_rank_random; undefined while never used).
struct LocalGeneratorStates {
  torch::Tensor cpu;
  torch::Tensor cuda;  // undefined unless the rank runs on CUDA
  torch::Tensor own_cpu;
  torch::Tensor own_cuda;
};

// Every rank's default generator states, gathered (a collective).
// Also every rank's text of each per-rank entry (a program's generator),
// by the entry's position in the State.
struct RandomStates {
  int64_t world_size = 1;
  std::vector<torch::Tensor> cpu;
  std::vector<torch::Tensor> cuda;  // empty unless the ranks run on CUDA
  // Every rank's own streams (empty tensors for ranks that never used
  // them); empty with one process.
  std::vector<torch::Tensor> own_cpu;
  std::vector<torch::Tensor> own_cuda;
  std::map<size_t, std::vector<std::string>> per_rank;
};
// Collective: the default generators (if the State has a RandomState; this
// rank's are `local`) and the per-rank entries of every rank.
RandomStates gather_random_states(Collectives& collectives, const State& state, const LocalGeneratorStates& local);

// How write_state_archive writes: a module entry through `write_module`;
// with `all_entries` false only module and optimizer entries (the other
// entries, the loss scale and the names are rank 0's part of a sharded
// checkpoint).
struct StateWriting {
  std::function<void(const torch::nn::Module&, torch::serialize::OutputArchive&)> write_module;
  bool all_entries = true;
};
void write_state_archive(torch::serialize::OutputArchive& archive, const State& state, const LossScaler& scaler,
                         const RandomStates& random_states, const StateWriting& writing);

// Whether `path` is a directory: a sharded checkpoint (sharded_checkpoints.cpp).
bool is_sharded_checkpoint(const std::string& path);

}  // namespace detail
}  // namespace fabric
