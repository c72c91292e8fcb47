// fabric::State and Fabric's checkpoints: save and load of a whole training
// state, of one module, optimizer or other object, through the strategy
// (which gathers and spreads sharded state) and its CheckpointIO plugin
// (which writes and reads the files). fsdp's sharded checkpoints:
// sharded_checkpoints.cpp.
#include <fabric/fabric.h>

#include "plugins/io/checkpoint_format.h"
#include "plugins/io/checkpoint_load.h"
#include "plugins/io/state_reader.h"
#include "strategies/strategy.h"

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
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace fabric {

using detail::entry_key;
using detail::kFormatKey;
using detail::kFormatVersion;
using detail::kGrowthTrackerKey;
using detail::kKindsKey;
using detail::kNamesKey;
using detail::kScaleKey;
using detail::read_string_list;
using detail::SchedulerSteps;

void Fabric::write_checkpoint_file(const std::string& path, const std::string& bytes) {
  strategy().checkpoint_io().write(path, bytes);
}

// ---- checkpoints of the whole state ----------------------------------------

std::vector<std::string> detail::read_string_list(torch::serialize::InputArchive& archive, const char* key,
                                                  const std::string& path) {
  c10::IValue value;
  if (!archive.try_read(key, value) || !value.isList()) {
    throw CheckpointError("fabric::load: '" + path + "' is not a fabric::State checkpoint (no '" + key +
                          "'); was it written by fabric.save(path, object)? Load it with "
                          "fabric.load(path, object) then");
  }
  std::vector<std::string> strings;
  for (const auto& item : value.toListRef()) strings.push_back(item.toStringRef());
  return strings;
}

const char* StateEntry::kind() const noexcept {
  static const char* const kNames[] = {"module", "optimizer", "tensor", "int64",     "int32",  "double",
                                       "float",  "bool",      "string", "scheduler", "loader", "random_state"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == std::variant_size<Target>::value,
                "a name for every kind of entry");
  if (const auto* const* stateful = std::get_if<detail::StatefulEntry*>(&target_)) return (*stateful)->kind();
  return kNames[target_.index()];
}

#ifdef FABRIC_HAS_PLATEAU_SCHEDULER
namespace detail {
namespace {

// A pointer to a private member, taken where access is not checked (an
// explicit instantiation's arguments), and handed out by a friend.
template <class Tag, typename Tag::Member Pointer>
struct PrivateMember {
  friend typename Tag::Member member(Tag) { return Pointer; }
};
using Plateau = torch::optim::ReduceLROnPlateauScheduler;
// One tag per member (Id), of its type T; each declares its own plain
// friend function (which GCC's -Wnon-template-friend asks about).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-template-friend"
#endif
template <class T, int Id>
struct PlateauField {
  using Member = T Plateau::*;
  friend Member member(PlateauField);
};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
using PlateauBest = PlateauField<float, 0>;
using PlateauBadEpochs = PlateauField<int, 1>;
using PlateauCooldown = PlateauField<int, 2>;
using PlateauLastEpoch = PlateauField<int, 3>;
template struct PrivateMember<PlateauBest, &Plateau::best>;
template struct PrivateMember<PlateauBadEpochs, &Plateau::num_bad_epochs>;
template struct PrivateMember<PlateauCooldown, &Plateau::cooldown_counter>;
template struct PrivateMember<PlateauLastEpoch, &Plateau::last_epoch>;

class PlateauSchedulerState final : public StatefulEntry {
 public:
  explicit PlateauSchedulerState(Plateau& scheduler) : scheduler_(scheduler) {}
  void save_state(torch::serialize::OutputArchive& archive) const override {
    archive.write("best", c10::IValue(static_cast<double>(scheduler_.*member(PlateauBest()))));
    archive.write("num_bad_epochs", c10::IValue(static_cast<int64_t>(scheduler_.*member(PlateauBadEpochs()))));
    archive.write("cooldown_counter", c10::IValue(static_cast<int64_t>(scheduler_.*member(PlateauCooldown()))));
    archive.write("last_epoch", c10::IValue(static_cast<int64_t>(scheduler_.*member(PlateauLastEpoch()))));
  }
  void load_state(torch::serialize::InputArchive& archive) override {
    c10::IValue best, bad, cooldown, last;
    archive.read("best", best);
    archive.read("num_bad_epochs", bad);
    archive.read("cooldown_counter", cooldown);
    archive.read("last_epoch", last);
    scheduler_.*member(PlateauBest()) = static_cast<float>(best.toDouble());
    scheduler_.*member(PlateauBadEpochs()) = static_cast<int>(bad.toInt());
    scheduler_.*member(PlateauCooldown()) = static_cast<int>(cooldown.toInt());
    scheduler_.*member(PlateauLastEpoch()) = static_cast<int>(last.toInt());
  }
  const char* kind() const override { return "plateau_scheduler"; }

 private:
  Plateau& scheduler_;
};

}  // namespace

std::shared_ptr<StatefulEntry> plateau_scheduler_state(torch::optim::ReduceLROnPlateauScheduler& scheduler) {
  return std::make_shared<PlateauSchedulerState>(scheduler);
}

}  // namespace detail
#endif

namespace {

bool has_random_state(const State& state) {
  for (const auto& entry : state.entries()) {
    if (std::holds_alternative<RandomState>(entry.target())) return true;
  }
  return false;
}

// Every rank's `text` on every rank (as int64 values: every backend
// gathers those).
std::vector<std::string> gather_texts(detail::Collectives& collectives, const std::string& text) {
  auto values = torch::empty({static_cast<int64_t>(text.size())}, torch::kLong);
  for (size_t i = 0; i < text.size(); ++i) values[static_cast<int64_t>(i)] = static_cast<unsigned char>(text[i]);
  std::vector<std::string> texts;
  for (const auto& gathered : collectives.all_gather(values.to(collectives.device()))) {
    const auto bytes = gathered.cpu().to(torch::kByte).contiguous();
    texts.emplace_back(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()), static_cast<size_t>(bytes.numel()));
  }
  return texts;
}

// Every rank reaches a load before any rank reads: a file rank 0 wrote on
// its own just before (`if (fabric.is_global_zero()) torch::save(...)`,
// fabricize's form of a save under a condition only some ranks meet) is
// complete when the others open it.
void wait_for_writers(Fabric& fabric) { fabric.barrier("fabric.load()"); }

}  // namespace

detail::RandomStates detail::gather_random_states(Collectives& collectives, const State& state,
                                                  const LocalGeneratorStates& local) {
  RandomStates states;
  const int world_size = collectives.placement().world_size;
  const torch::Device device = collectives.device();
  states.world_size = world_size;
  for (size_t index = 0; index < state.entries().size(); ++index) {
    const auto* stateful = std::get_if<StatefulEntry*>(&state.entries()[index].target());
    if (stateful != nullptr && (*stateful)->per_rank()) {
      states.per_rank[index] = gather_texts(collectives, (*stateful)->per_rank_text());
    }
  }
  if (!has_random_state(state)) return states;
  // As int64: every backend gathers it.
  const auto gather = [&collectives, &device](const torch::Tensor& state) {
    std::vector<torch::Tensor> all;
    for (const auto& tensor : collectives.all_gather(state.to(torch::kLong).to(device))) {
      all.push_back(tensor.cpu().to(torch::kByte));
    }
    return all;
  };
  states.cpu = gather(local.cpu);
  if (device.is_cuda()) states.cuda = gather(local.cuda);
  // Every rank's own streams (fabric.per_rank_random), after a byte that
  // says whether the rank used them (Gloo gathers no empty tensor); an
  // empty tensor for a rank that did not.
  if (world_size > 1) {
    const auto own = [&gather](const torch::Tensor& state) {
      const auto used = torch::full({1}, state.defined() ? 1 : 0, torch::kByte);
      std::vector<torch::Tensor> all = gather(state.defined() ? torch::cat({used, state}) : used);
      for (auto& one : all) one = one[0].item<int>() != 0 ? one.slice(0, 1).clone() : torch::empty({0}, torch::kByte);
      return all;
    };
    states.own_cpu = own(local.own_cpu);
    if (device.is_cuda()) states.own_cuda = own(local.own_cuda);
  }
  return states;
}

State::State(std::initializer_list<StateEntry> entries) {
  for (const auto& entry : entries) add(entry);
}

State& State::add(StateEntry entry) {
  for (const auto& existing : entries_) {
    if (existing.name() == entry.name()) {
      throw std::invalid_argument("fabric::State: the name '" + entry.name() + "' appears twice");
    }
  }
  entries_.push_back(std::move(entry));
  return *this;
}

std::shared_ptr<void> Fabric::hold_parameters_readable() {
  auto undo = strategy().collectives().run("fabric.save()", [&] { return strategy().make_parameters_readable(); });
  if (!undo) return nullptr;
  return std::shared_ptr<void>(nullptr, [undo](void*) { undo(); });
}

void Fabric::finish_save(const std::string& path, const std::string& error_on_rank_zero) {
  auto scope = strategy().collectives().scope("fabric.save()");
  // Doubles as the barrier after the write: no rank returns before the file
  // is in place, and a failure on rank 0 throws on every rank.
  const std::string error = broadcast(error_on_rank_zero, 0);
  if (!error.empty()) {
    throw CheckpointError("fabric::save: rank 0 could not write '" + path + "': " + error);
  }
}

void Fabric::load_module_file(const std::string& path, torch::nn::Module& module) {
  auto scope = strategy().collectives().scope("fabric.load()");
  wait_for_writers(*this);
  detail::TensorCopies copies;
  const auto check = [&] {
    torch::serialize::InputArchive archive;
    strategy().checkpoint_io().open(path, archive, device());
    detail::collect_module_tensors(module, archive, "", copies);
  };
  detail::agree_on_load(strategy().collectives(), detail::load_error_of(path, check));
  detail::copy_module_tensors(copies);
  strategy().module_loaded(module);
}

void Fabric::load_other_file(const std::string& path, const std::function<void(const std::string&)>& read) {
  auto scope = strategy().collectives().scope("fabric.load()");
  wait_for_writers(*this);
  const auto load = [&] {
    torch::serialize::InputArchive archive;
    strategy().checkpoint_io().open(path, archive, device());
    try {
      read(path);
    } catch (const std::exception& error) {
      throw CheckpointError("fabric::load: '" + path + "': " + detail::first_line_of(detail::message_of(error)) +
                            " (does the file hold what is loaded into?)");
    }
  };
  detail::agree_on_load(strategy().collectives(), detail::load_error_of(path, load));
}

void Fabric::save_optimizer_file(const std::string& path, torch::optim::Optimizer& optimizer) {
  strategy().check_in_sync("fabric.save()");
  auto undo =
      strategy().collectives().run("fabric.save()", [&] { return strategy().gather_optimizer_state(optimizer); });
  struct Undo {
    std::function<void()>& step;
    ~Undo() {
      if (step) step();
    }
  } undo_at_exit{undo};
  save_with(path, [&optimizer](std::ostream& stream) { torch::save(optimizer, stream); });
}

void Fabric::load_optimizer_file(const std::string& path, torch::optim::Optimizer& optimizer) {
  auto scope = strategy().collectives().scope("fabric.load()");
  wait_for_writers(*this);
  torch::serialize::InputArchive archive;
  const auto open = [&] { strategy().checkpoint_io().open(path, archive, device()); };
  detail::agree_on_load(strategy().collectives(), detail::load_error_of(path, open));
  // An optimizer checks its state while it reads it: agreed on separately.
  const auto load = [&] {
    try {
      optimizer.load(archive);
    } catch (const std::exception& error) {
      throw CheckpointError("fabric::load: '" + path + "': cannot load the optimizer from it: " +
                            detail::first_line_of(detail::message_of(error)) +
                            " (was it saved from this optimizer type, over the same parameters?)");
    }
  };
  detail::agree_on_load(strategy().collectives(), detail::load_error_of(path, load));
  strategy().optimizer_loaded(optimizer);
}

void detail::write_state_archive(torch::serialize::OutputArchive& archive, const State& state, const LossScaler& scaler,
                                 const RandomStates& random_states, const StateWriting& writing) {
  c10::List<std::string> names;
  c10::List<std::string> kinds;
  for (size_t index = 0; index < state.entries().size(); ++index) {
    const StateEntry& entry = state.entries()[index];
    names.push_back(entry.name());
    kinds.push_back(entry.kind());
    const std::string key = entry_key(index);
    std::visit(
        [&](const auto& target) {
          using Target = std::decay_t<decltype(target)>;
          constexpr bool sharded_kind = std::is_same<Target, std::shared_ptr<torch::nn::Module>>::value ||
                                        std::is_same<Target, torch::optim::Optimizer*>::value;
          if (!sharded_kind && !writing.all_entries) return;
          if constexpr (std::is_same<Target, std::shared_ptr<torch::nn::Module>>::value) {
            torch::serialize::OutputArchive nested;
            writing.write_module(*target, nested);
            archive.write(key, nested);
          } else if constexpr (std::is_same<Target, torch::optim::Optimizer*>::value) {
            torch::serialize::OutputArchive nested;
            target->save(nested);
            archive.write(key, nested);
          } else if constexpr (std::is_same<Target, torch::Tensor*>::value) {
            archive.write(key, *target, /*is_buffer=*/true);
          } else if constexpr (std::is_same<Target, torch::optim::LRScheduler*>::value) {
            archive.write(key, c10::IValue(static_cast<int64_t>(SchedulerSteps::of(*target))));
          } else if constexpr (std::is_same<Target, detail::StatefulEntry*>::value) {
            torch::serialize::OutputArchive nested;
            if (target->per_rank()) {
              const auto found = random_states.per_rank.find(index);
              c10::List<std::string> texts;
              if (found != random_states.per_rank.end())
                for (const auto& text : found->second) texts.push_back(text);
              nested.write("world_size", c10::IValue(static_cast<int64_t>(texts.size())));
              nested.write("ranks", c10::IValue(texts));
            } else {
              target->save_state(nested);
            }
            archive.write(key, nested);
          } else if constexpr (std::is_same<Target, RandomState>::value) {
            torch::serialize::OutputArchive nested;
            nested.write("world_size", c10::IValue(random_states.world_size));
            for (size_t rank = 0; rank < random_states.cpu.size(); ++rank) {
              nested.write("cpu_" + std::to_string(rank), random_states.cpu[rank], /*is_buffer=*/true);
            }
            for (size_t rank = 0; rank < random_states.cuda.size(); ++rank) {
              nested.write("cuda_" + std::to_string(rank), random_states.cuda[rank], /*is_buffer=*/true);
            }
            // Own streams (per_rank_random) of the ranks that used them.
            for (size_t rank = 0; rank < random_states.own_cpu.size(); ++rank) {
              if (random_states.own_cpu[rank].numel() == 0) continue;
              nested.write("own_cpu_" + std::to_string(rank), random_states.own_cpu[rank], /*is_buffer=*/true);
            }
            for (size_t rank = 0; rank < random_states.own_cuda.size(); ++rank) {
              if (random_states.own_cuda[rank].numel() == 0) continue;
              nested.write("own_cuda_" + std::to_string(rank), random_states.own_cuda[rank], /*is_buffer=*/true);
            }
            archive.write(key, nested);
          } else if constexpr (std::is_same<Target, int32_t*>::value) {
            archive.write(key, c10::IValue(static_cast<int64_t>(*target)));
          } else if constexpr (std::is_same<Target, float*>::value) {
            archive.write(key, c10::IValue(static_cast<double>(*target)));
          } else {
            archive.write(key, c10::IValue(*target));
          }
        },
        entry.target());
  }
  if (!writing.all_entries) return;
  if (scaler.active) {
    archive.write(kScaleKey, c10::IValue(scaler.scale));
    archive.write(kGrowthTrackerKey, c10::IValue(scaler.growth_tracker));
  }
  archive.write(kFormatKey, c10::IValue(kFormatVersion));
  archive.write(kNamesKey, c10::IValue(names));
  archive.write(kKindsKey, c10::IValue(kinds));
}

void Fabric::save(const std::string& path, const State& state) {
  const auto& scaler = strategy().precision().scaler();
  strategy().check_in_sync("fabric.save()");
  // fsdp: each rank writes its own part (sharded_checkpoints.cpp).
  if (saves_sharded()) {
    save_sharded(path, state);
    return;
  }
  // Sharded strategies: rank 0's optimizers hold the whole state while it
  // writes (the same file a ddp run writes), and only their own afterwards.
  std::vector<std::function<void()>> undo;
  struct Undo {
    std::vector<std::function<void()>>& steps;
    ~Undo() {
      for (auto& step : steps) {
        if (step) step();
      }
    }
  } undo_at_exit{undo};
  for (const auto& entry : state.entries()) {
    if (auto* const* optimizer = std::get_if<torch::optim::Optimizer*>(&entry.target())) {
      undo.push_back(strategy().collectives().run("fabric.save()",
                                                  [&] { return strategy().gather_optimizer_state(**optimizer); }));
    }
  }
  // Every rank's generators, gathered by every rank before rank 0 writes.
  detail::RandomStates random_states;
  random_states = detail::gather_random_states(strategy().collectives(), state, generator_states());
  save_with(path, [&state, &scaler, &random_states](std::ostream& stream) {
    torch::serialize::OutputArchive archive;
    detail::write_state_archive(
        archive, state, scaler, random_states,
        {[](const torch::nn::Module& module, torch::serialize::OutputArchive& nested) { module.save(nested); }, true});
    archive.save_to(stream);
  });
}

void Fabric::load(const std::string& path, const State& state, bool strict) {
  wait_for_writers(*this);
  // A sharded checkpoint (fsdp) is a directory, loaded by any strategy on
  // any number of ranks (sharded_checkpoints.cpp).
  if (detail::is_sharded_checkpoint(path)) {
    load_sharded(path, state, strict);
    return;
  }
  auto scope = strategy().collectives().scope("fabric.load()");
  detail::StateReader reader(
      path, state, strict, strategy().checkpoint_io(), device(), strategy().collectives().placement(),
      strategy().precision().scaler(),
      {[this](const torch::nn::Module& module) { strategy().module_loaded(module); },
       [this](torch::optim::Optimizer& optimizer) { strategy().optimizer_loaded(optimizer); },
       [this](const detail::LocalGeneratorStates& states) { restore_generator_states(states); }});
  // What can be checked, agreed on by every rank before the first write
  // into the caller's objects; then the writes, agreed on again.
  detail::agree_on_load(strategy().collectives(), detail::load_error_of(path, [&] { reader.check(); }));
  detail::agree_on_load(strategy().collectives(), detail::load_error_of(path, [&] { reader.apply(); }));
}

}  // namespace fabric
