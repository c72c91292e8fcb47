// Reads a fabric::State checkpoint (one file, as fabric.save(path, state)
// writes it) into the state's objects, in two phases that every rank agrees
// on in turn (Fabric::load): first everything that can be checked before
// the first write into the caller's objects (the format, the names and
// kinds of the entries, every module's tensors), then the writes (an
// optimizer checks its state only while it reads it).
#pragma once

#include <fabric/types.h>

#include "plugins/environments/process_placement.h"
#include "plugins/io/checkpoint_format.h"
#include "plugins/io/checkpoint_io.h"
#include "plugins/io/checkpoint_load.h"
#include "plugins/precision/precision.h"

#include <functional>
#include <string>
#include <vector>

namespace fabric {
namespace detail {

class StateReader {
 public:
  // What the layers above do once an object is loaded (the strategy
  // re-shards a module or an optimizer; the Fabric restores this rank's
  // generators).
  struct Hooks {
    std::function<void(const torch::nn::Module&)> module_loaded;
    std::function<void(torch::optim::Optimizer&)> optimizer_loaded;
    std::function<void(const LocalGeneratorStates&)> restore_generators;
  };
  StateReader(std::string path, const State& state, bool strict, const CheckpointIO& io, torch::Device device,
              const ProcessPlacement& placement, LossScaler& scaler, Hooks hooks);

  // Opens the file and checks it against the state; throws a
  // CheckpointError naming the file and what is wrong.
  void check();
  // Writes every entry (and the loss scaler's state) from the file; throws
  // a CheckpointError naming the entry that could not be read.
  void apply();

 private:
  [[noreturn]] void fail(const std::string& why) const;
  // The positions in the file of the state's entries, or a failure naming
  // the missing or (strict) unknown ones.
  void match_entries(const std::vector<std::string>& names, const std::vector<std::string>& kinds);
  void load_entry(size_t position);
  void load_random_states(const std::string& key);

  std::string path_;
  const State& state_;
  bool strict_;
  const CheckpointIO& io_;
  torch::Device device_;
  ProcessPlacement placement_;
  LossScaler& scaler_;
  Hooks hooks_;
  torch::serialize::InputArchive archive_;
  std::vector<size_t> file_index_of_entry_;
  // Module entries: their tensors, found and checked before anything is written.
  std::vector<TensorCopies> module_copies_;
};

}  // namespace detail
}  // namespace fabric
