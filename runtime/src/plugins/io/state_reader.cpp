// See state_reader.h.
#include "plugins/io/state_reader.h"

#include "utilities/messages.h"

#include <algorithm>
#include <type_traits>
#include <utility>
#include <variant>

namespace fabric {
namespace detail {

namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i) text += (i > 0 ? ", " : "") + items[i];
  return text;
}

}  // namespace

StateReader::StateReader(std::string path, const State& state, bool strict, const CheckpointIO& io,
                         torch::Device device, const ProcessPlacement& placement, LossScaler& scaler, Hooks hooks)
    : path_(std::move(path)),
      state_(state),
      strict_(strict),
      io_(io),
      device_(device),
      placement_(placement),
      scaler_(scaler),
      hooks_(std::move(hooks)),
      module_copies_(state.entries().size()) {}

void StateReader::fail(const std::string& why) const { throw CheckpointError("fabric::load: '" + path_ + "': " + why); }

void StateReader::check() {
  io_.open(path_, archive_, device_);
  c10::IValue format;
  if (!archive_.try_read(kFormatKey, format) || !format.isInt()) {
    fail(
        "not a fabric::State checkpoint; was it written by fabric.save(path, object)? "
        "Then load it with fabric.load(path, object)");
  }
  if (format.toInt() > kFormatVersion) {
    fail("written by a newer Fabric (format " + std::to_string(format.toInt()) + ")");
  }
  const auto names = read_string_list(archive_, kNamesKey, path_);
  const auto kinds = read_string_list(archive_, kKindsKey, path_);
  if (names.size() != kinds.size()) fail("corrupted: names and kinds differ in number");
  match_entries(names, kinds);
  for (size_t position = 0; position < state_.entries().size(); ++position) {
    const StateEntry& entry = state_.entries()[position];
    const auto* module = std::get_if<std::shared_ptr<torch::nn::Module>>(&entry.target());
    if (module == nullptr) continue;
    try {
      torch::serialize::InputArchive nested;
      archive_.read(entry_key(file_index_of_entry_[position]), nested);
      collect_module_tensors(**module, nested, "", module_copies_[position]);
    } catch (const std::exception& error) {
      fail("cannot load '" + entry.name() + "': " + first_line_of(message_of(error)));
    }
  }
}

void StateReader::match_entries(const std::vector<std::string>& names, const std::vector<std::string>& kinds) {
  std::vector<std::string> missing;
  for (const auto& entry : state_.entries()) {
    const auto found = std::find(names.begin(), names.end(), entry.name());
    if (found == names.end()) {
      missing.push_back("'" + entry.name() + "'");
      continue;
    }
    const size_t index = static_cast<size_t>(found - names.begin());
    if (kinds[index] != entry.kind()) {
      fail("'" + entry.name() + "' holds a " + kinds[index] + " in the checkpoint, but a " + entry.kind() +
           " was passed to load it into");
    }
    file_index_of_entry_.push_back(index);
  }
  if (!missing.empty()) {
    std::vector<std::string> held;
    for (const auto& name : names) held.push_back("'" + name + "'");
    fail("the checkpoint has no " + joined(missing) + " (it holds: " + joined(held) + ")");
  }
  if (!strict_) return;
  std::vector<std::string> unknown;
  for (const auto& name : names) {
    bool requested = false;
    for (const auto& entry : state_.entries()) requested = requested || entry.name() == name;
    if (!requested) unknown.push_back("'" + name + "'");
  }
  if (!unknown.empty()) {
    fail("the checkpoint also holds " + joined(unknown) +
         ", which the state does not name (pass strict = false to ignore them)");
  }
}

void StateReader::apply() {
  if (scaler_.active) {
    c10::IValue scale;
    c10::IValue growth_tracker;
    if (archive_.try_read(kScaleKey, scale) && archive_.try_read(kGrowthTrackerKey, growth_tracker)) {
      scaler_.scale = scale.toDouble();
      scaler_.growth_tracker = growth_tracker.toInt();
    }
  }
  for (size_t position = 0; position < state_.entries().size(); ++position) {
    try {
      load_entry(position);
    } catch (const std::exception& error) {
      fail("cannot load '" + state_.entries()[position].name() + "': " + first_line_of(message_of(error)));
    }
  }
}

void StateReader::load_entry(size_t position) {
  const StateEntry& entry = state_.entries()[position];
  const std::string key = entry_key(file_index_of_entry_[position]);
  std::visit(
      [&](const auto& target) {
        using Target = std::decay_t<decltype(target)>;
        if constexpr (std::is_same<Target, std::shared_ptr<torch::nn::Module>>::value) {
          copy_module_tensors(module_copies_[position]);
          hooks_.module_loaded(*target);
        } else if constexpr (std::is_same<Target, torch::optim::Optimizer*>::value) {
          torch::serialize::InputArchive nested;
          archive_.read(key, nested);
          target->load(nested);
          hooks_.optimizer_loaded(*target);
        } else if constexpr (std::is_same<Target, torch::Tensor*>::value) {
          torch::Tensor loaded;
          archive_.read(key, loaded, /*is_buffer=*/true);
          *target = loaded;
        } else if constexpr (std::is_same<Target, torch::optim::LRScheduler*>::value) {
          c10::IValue steps;
          archive_.read(key, steps);
          SchedulerSteps::of(*target) = static_cast<unsigned>(steps.toInt());
        } else if constexpr (std::is_same<Target, StatefulEntry*>::value) {
          torch::serialize::InputArchive nested;
          archive_.read(key, nested);
          if (!target->per_rank()) {
            target->load_state(nested);
            return;
          }
          const auto texts = read_string_list(nested, "ranks", path_);
          if (static_cast<int>(texts.size()) == placement_.world_size) {
            target->load_per_rank_text(texts[static_cast<size_t>(placement_.global_rank)]);
          } else if (placement_.global_rank == 0) {
            write_stderr_line("fabric: note: '" + path_ + "' holds the states of '" + entry.name() + "' of " +
                              std::to_string(texts.size()) + " ranks, this job has " +
                              std::to_string(placement_.world_size) +
                              ": it is left as it is (the run continues, not bit for bit)");
          }
        } else if constexpr (std::is_same<Target, RandomState>::value) {
          load_random_states(key);
        } else {
          c10::IValue value;
          archive_.read(key, value);
          if constexpr (std::is_same<Target, int64_t*>::value) {
            *target = value.toInt();
          } else if constexpr (std::is_same<Target, int32_t*>::value) {
            *target = static_cast<int32_t>(value.toInt());
          } else if constexpr (std::is_same<Target, double*>::value) {
            *target = value.toDouble();
          } else if constexpr (std::is_same<Target, float*>::value) {
            *target = static_cast<float>(value.toDouble());
          } else if constexpr (std::is_same<Target, bool*>::value) {
            *target = value.toBool();
          } else {
            *target = value.toStringRef();
          }
        }
      },
      entry.target());
}

void StateReader::load_random_states(const std::string& key) {
  torch::serialize::InputArchive nested;
  archive_.read(key, nested);
  c10::IValue saved_world;
  nested.read("world_size", saved_world);
  if (saved_world.toInt() != placement_.world_size) {
    if (placement_.global_rank == 0) {
      write_stderr_line("fabric: note: '" + path_ + "' holds the random generator states of " +
                        std::to_string(saved_world.toInt()) + " ranks, this job has " +
                        std::to_string(placement_.world_size) +
                        ": the generators are left as they are (the run continues, not bit for bit)");
    }
    return;
  }
  const std::string rank = std::to_string(placement_.global_rank);
  LocalGeneratorStates states;
  nested.read("cpu_" + rank, states.cpu, /*is_buffer=*/true);
  states.cpu = states.cpu.cpu();
  if (device_.is_cuda() && nested.try_read("cuda_" + rank, states.cuda, /*is_buffer=*/true)) {
    states.cuda = states.cuda.cpu();
  }
  // This rank's own streams (absent: never used, or a file of an older Fabric).
  if (nested.try_read("own_cpu_" + rank, states.own_cpu, /*is_buffer=*/true)) states.own_cpu = states.own_cpu.cpu();
  if (device_.is_cuda() && nested.try_read("own_cuda_" + rank, states.own_cuda, /*is_buffer=*/true)) {
    states.own_cuda = states.own_cuda.cpu();
  }
  hooks_.restore_generators(states);
}

}  // namespace detail
}  // namespace fabric
