// The "fsdp" strategy (ZeRO stage 3; aliases "zero3", "deepspeed_stage_3").
//
// Parameters, gradients and optimizer state sharded by element. The
// trained parameters are grouped into units by an auto-wrap policy
// (Options::fsdp_min_num_params, Lightning's min_num_params); a unit's
// parameters of one dtype are laid end to end in a flat of `total`
// elements, cut into one chunk per rank (the last padded): rank r keeps
// elements [r * chunk, (r + 1) * chunk) in its shard, and no parameter's
// own memory between uses.
//
//   forward   the first operator that reads a released unit brings it back:
//             the StorageMaterializer's callback allocates its storages and
//             the fill all-gathers the shards and copies them into the
//             parameters; the unit resident before it is released then
//             (reshard after forward). A release first copies this rank's
//             chunk back into its shard, so values written into a resident
//             unit (a checkpoint being loaded) are kept. Each fill starts
//             gathering the unit expected next (the following one in
//             forward, the preceding one in backward), so that its transfer
//             overlaps this unit's compute; a guess that proves wrong, or
//             shards that change meanwhile (a step, a load), drop it.
//   backward  autograd's saved views read the unit again, which brings it
//             back the same way; when the last of a unit's gradients has
//             been accumulated (a post hook on each parameter's
//             AccumulateGrad node), the unit's gradients are
//             reduce-scattered (Gloo in LibTorch 1.13 has no
//             reduce_scatter: each chunk is sent to its rank, which sums)
//             and the unit is released. A parameter's gradient is then this rank's
//             piece of it, flat (undefined where the rank holds none).
//   step      each parameter holding a piece on this rank becomes that
//             piece of the shard (set_data) while the optimizer steps, so
//             its optimizer state is piece-sized; nothing is broadcast:
//             the next forward gathers the new values.
//
// Checkpoints keep zero2's per-parameter owners: around a save each owner
// holds its parameters and their optimizer state whole (hold_owned_state,
// gather_optimizer_state); a load gives every rank whole states, which it
// cuts to its pieces (optimizer_loaded).
//
// Every rank must bring units back in the same order (the same operators on
// the model, as ddp requires the same backward passes): each fill first
// checks that with a small all-reduce and ends the process, with the
// reason, when ranks differ.
#include "utilities/messages.h"
#include "strategies/storage_materializer.h"
#include "strategies/unit_buffer_pool.h"
#include "strategies/accumulation_hooks.h"
#include "strategies/fsdp.h"
#include "strategies/zero.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

namespace fabric {
namespace detail {
namespace {

constexpr int kMmapThreshold = 1 << 20;

// The modules' parameters grouped into units: children first; a module
// whose trained parameters that no unit took yet number at least
// `min_params` becomes a unit; the model's remaining ones are its last unit.
struct Unit {
  std::string name;                 // the module's path ("" for the model's root)
  std::vector<at::Tensor> members;  // in the model's parameter order
};

void collect_units(const torch::nn::Module& module, const std::string& path, bool root, int64_t min_params,
                   const std::unordered_set<const c10::TensorImpl*>& trained,
                   std::unordered_set<const c10::TensorImpl*>& taken, std::vector<Unit>& units,
                   std::vector<at::Tensor>& remaining) {
  std::vector<at::Tensor> mine;
  for (const auto& child : module.named_children()) {
    collect_units(*child.value(), path.empty() ? child.key() : path + "." + child.key(), false, min_params, trained,
                  taken, units, mine);
  }
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    const c10::TensorImpl* impl = item.value().unsafeGetTensorImpl();
    if (trained.count(impl) == 0 || !taken.insert(impl).second) continue;
    mine.push_back(item.value());
  }
  int64_t count = 0;
  for (const auto& tensor : mine) count += tensor.numel();
  if (!mine.empty() && (root || count >= min_params)) {
    units.push_back({path, std::move(mine)});
    return;
  }
  remaining.insert(remaining.end(), mine.begin(), mine.end());
}

// A parameter's elements in this rank's shard: [in_parameter,
// in_parameter + length) of it flattened, at in_shard in the shard.
struct Piece {
  size_t unit = 0;
  size_t flat = 0;
  int64_t in_parameter = 0;
  int64_t in_shard = 0;
  int64_t length = 0;
  int64_t in_flat = 0;  // where the whole parameter starts in its flat (any rank's piece follows from it)
};

// A unit's parameters of one dtype, end to end.
struct Flat {
  at::ScalarType dtype = at::kFloat;
  std::vector<size_t> members;   // indices into parameters_
  std::vector<int64_t> offsets;  // each member's first element
  int64_t total = 0;
  int64_t chunk = 0;  // elements per rank
  at::Tensor shard;   // this rank's chunk
};

// A per-parameter state of the optimizer's own kind, read back from what
// `archive` holds.
std::unique_ptr<torch::optim::OptimizerParamState> state_of_archive(const torch::optim::Optimizer& optimizer,
                                                                    torch::serialize::OutputArchive& archive) {
  std::ostringstream bytes(std::ios::out | std::ios::binary);
  archive.save_to(bytes);
  torch::serialize::InputArchive read;
  std::istringstream stream(bytes.str(), std::ios::in | std::ios::binary);
  read.load_from(stream);
  auto state = new_parameter_state(optimizer);
  state->serialize(read);
  return state;
}

// Applies `change` to every tensor of an optimizer's per-parameter state
// (Adam's exp_avg, SGD's momentum_buffer; any optimizer's, through its own
// serialization), keeping its other entries.
std::unique_ptr<torch::optim::OptimizerParamState> change_state_tensors(
    const torch::optim::Optimizer& optimizer, torch::optim::OptimizerParamState& state,
    const std::function<at::Tensor(const at::Tensor&)>& change) {
  torch::serialize::OutputArchive written;
  state.serialize(written);
  std::ostringstream bytes(std::ios::out | std::ios::binary);
  written.save_to(bytes);
  torch::serialize::InputArchive read;
  std::istringstream stream(bytes.str(), std::ios::in | std::ios::binary);
  read.load_from(stream);
  torch::serialize::OutputArchive changed;
  for (const auto& key : read.keys()) {
    c10::IValue value;
    if (!read.try_read(key, value)) continue;
    if (value.isTensor() && value.toTensor().defined()) value = c10::IValue(change(value.toTensor()));
    changed.write(key, value);
  }
  return state_of_archive(optimizer, changed);
}

class FsdpStrategy : public ZeroStrategy {
 public:
  explicit FsdpStrategy(const StrategyContext& context)
      : ZeroStrategy(context, 3),
        hooks_([this](size_t key) { accumulated(hooked_[key].first, hooked_[key].second); }),
        materializer_([this](size_t group) { fill(group); }, [this](size_t group) { write_back(group); }) {
    materializer_.set_release_others_on_demand(true);
    // Gloo (CPU): one broadcast / one reduce per rank's chunk, in place.
    // Gloo's own flat all-gather and reduce-scatter (LibTorch 2.x; 1.13 has
    // neither) were slower here: 1430 against 1077 ms per step of the 42M
    // MLP on 2 ranks (docs/runtime.md). NCCL: the flat collectives.
    if (!context.device.is_cuda()) reduce_scatter_unavailable_ = all_gather_unavailable_ = true;
#ifdef __GLIBC__
    // Units are allocated and freed at every forward and backward; glibc
    // raises its mmap threshold to the size of the largest block freed, after
    // which such blocks come from the heap and stay resident when freed (the
    // saving disappears). A fixed threshold keeps large blocks mmapped, so a
    // released unit is given back to the system.
    if (context.world_size > 1) mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
#endif
  }

  // Without before_shutdown (a job ending on an exception) the parameters
  // stay released: no collective can run any more, and unfilled bytes would
  // be silent garbage.
  ~FsdpStrategy() override { materializer_.abandon(); }

  // Every rank is in ~Fabric: the model is whole again on every rank, for
  // code that uses it after the Fabric is gone. Its gradients (pieces) are
  // dropped.
  void before_shutdown() override {
    if (!context_.group) return;
    drop_prefetch();
    materializer_.set_release_others_on_demand(false);
    materializer_.materialize_all();
    for (size_t index = 0; index < pieces_.size(); ++index) {
      if (pieces_[index].length > 0) parameters_[index].tensor.mutable_grad() = at::Tensor();
    }
  }

  void setup_module(const torch::nn::Module& module, const NamedParameters& trained) override {
    std::unordered_set<const c10::TensorImpl*> trained_set, taken;
    for (const auto& item : trained) trained_set.insert(item.second.unsafeGetTensorImpl());
    // A parameter already set up with another model stays in its unit.
    for (const auto& unit : units_) {
      for (size_t index : unit.members) taken.insert(parameters_[index].tensor.unsafeGetTensorImpl());
    }
    std::vector<Unit> found;
    std::vector<at::Tensor> remaining;
    collect_units(module, "", true, context_.options.fsdp_min_num_params(), trained_set, taken, found, remaining);
    // Trained tensors that are no module's parameter (a loose set's holder
    // has them all as its own): one more unit.
    std::vector<at::Tensor> others;
    for (const auto& item : trained) {
      if (taken.insert(item.second.unsafeGetTensorImpl()).second) others.push_back(item.second);
    }
    if (!others.empty()) found.push_back({"", std::move(others)});
    ZeroStrategy::setup_module(module, trained);
    const size_t model = models_.size() - 1;
    if (!context_.group) return;  // one process: nothing to shard

    const int64_t world = context_.world_size;
    for (size_t u = 0; u < found.size(); ++u) {
      FsdpUnit unit;
      unit.model = model;
      unit.unit = static_cast<int>(u);
      unit.name = found[u].name.empty() ? "(the model's own parameters)" : "'" + found[u].name + "'";
      std::vector<at::Tensor> tensors;
      for (const auto& tensor : found[u].members) {
        const Parameter* tracked = lookup(tensor);
        if (tracked == nullptr) continue;
        const size_t index = static_cast<size_t>(tracked - parameters_.data());
        unit.members.push_back(index);
        tensors.push_back(tensor);
        hook_accumulation(index, units_.size(), unit.members.size() - 1);
        Flat* flat = nullptr;
        for (auto& existing : unit.flats) {
          if (existing.dtype == tensor.scalar_type()) flat = &existing;
        }
        if (flat == nullptr) {
          unit.flats.emplace_back();
          flat = &unit.flats.back();
          flat->dtype = tensor.scalar_type();
        }
        flat->members.push_back(index);
        flat->offsets.push_back(flat->total);
        flat->total += tensor.numel();
      }
      if (unit.members.empty()) continue;
      pieces_.resize(parameters_.size());
      for (size_t f = 0; f < unit.flats.size(); ++f) {
        Flat& flat = unit.flats[f];
        flat.chunk = std::max<int64_t>(1, (flat.total + world - 1) / world);
        flat.shard = at::zeros({flat.chunk}, at::TensorOptions().dtype(flat.dtype).device(context_.device));
        const int64_t low = context_.rank * flat.chunk;
        const int64_t high = low + flat.chunk;
        for (size_t k = 0; k < flat.members.size(); ++k) {
          const int64_t begin = std::max(low, flat.offsets[k]);
          const int64_t end = std::min(high, flat.offsets[k] + parameters_[flat.members[k]].tensor.numel());
          pieces_[flat.members[k]] = {units_.size(), f, 0, 0, 0, flat.offsets[k]};
          if (end <= begin) continue;
          pieces_[flat.members[k]] = {units_.size(), f,           begin - flat.offsets[k],
                                      begin - low,   end - begin, flat.offsets[k]};
        }
      }
      // Parameters that each fill one storage of their own (what modules
      // make) are pointed into the gathered buffer rather than copied.
      std::unordered_set<const c10::StorageImpl*> storages;
      unit.zero_copy = true;
      for (const auto& tensor : tensors) {
        unit.zero_copy = unit.zero_copy && tensor.is_contiguous() && tensor.storage_offset() == 0 &&
                         tensor.storage().nbytes() == static_cast<size_t>(tensor.numel()) * tensor.element_size() &&
                         storages.insert(tensor.storage().unsafeGetStorageImpl()).second;
      }
      unit.group = materializer_.add_group(tensors, {}, unit.zero_copy);
      units_.push_back(std::move(unit));
      // The release copies this rank's chunk into its shard.
      materializer_.release(units_.back().group);
    }
  }

  void trained_parameters_changed(const torch::nn::Module* module, const NamedParameters& trained) override {
    (void)module;
    (void)trained;
    throw std::logic_error(
        "fabric: strategy 'fsdp' shards the parameters a model trained when it was set up, in the units it made "
        "then; that set changed since (requires_grad changed: a LoRA phase, a layer unfrozen; or parameters that "
        "fabric.setup_optimizer took alone were set up with a model later), which 'fsdp' does not follow. Use "
        "strategy 'zero2' or 'ddp' for such a schedule, or set requires_grad and set up every model before "
        "training");
  }

  void setup_optimizer(torch::optim::Optimizer& optimizer) override {
    if (dynamic_cast<torch::optim::LBFGS*>(&optimizer) != nullptr) {
      throw std::invalid_argument(
          "fabric::setup: strategy 'fsdp' cannot run torch::optim::LBFGS: LBFGS computes one search direction "
          "from the gradients of all parameters, and under 'fsdp' each rank holds and updates only its "
          "pieces of the parameters. Use strategy 'ddp' with LBFGS");
    }
    // State an optimizer makes when it is built (Adagrad's sums). A new
    // optimizer's states may sit where an old one's did: all are checked.
    cut_states_.clear();
    cut_states_to_pieces(optimizer);
  }

  // Its units move parameters between their own storages (set_data); a
  // parameter replaced by the program is caught by the version check.
  bool follows_replaced_parameters() const override { return false; }
  bool needs_reached_models() const override { return !models_.empty(); }

  // Which units' gradients are reduced as their backward ends: those whose
  // parameters every rank's backward reaches alike (one small all-reduce of
  // per-parameter flags); the others are reduced after backward, in unit
  // order.
  void before_backward(const std::vector<ReachedModel>& models, const at::Tensor& loss) override {
    ZeroStrategy::before_backward(models, loss);
    scatter_in_flight_.reset();  // one a pass that threw left: nothing waits on it
    if (!context_.group || units_.empty()) return;
    // A gradient still defined now (the reduced pieces were set aside) is
    // a whole one that passes under no_backward_sync accumulated: it is
    // reduced with this pass even where this pass does not reach it.
    std::vector<int64_t> flags;
    for (const auto& unit : units_) {
      const ReachedModel* reached = reached_model(models, unit.model);
      const bool synchronized = reached != nullptr && reached->synchronized;
      for (size_t index : unit.members) {
        const at::Tensor& parameter = parameters_[index].tensor;
        const bool reaches = synchronized && ((reached->graph != nullptr && reached->graph->reaches(parameter)) ||
                                              parameter.grad().defined());
        flags.push_back(reaches ? 1 : 0);
      }
    }
    const auto [most_of, least_of] = max_and_min_across_ranks(flags);
    size_t position = 0;
    for (auto& unit : units_) {
      bool uniform = true;
      bool any = false;
      unit.expected.assign(unit.members.size(), 0);
      for (size_t k = 0; k < unit.members.size(); ++k, ++position) {
        const int64_t most = most_of[position];
        const int64_t least = least_of[position];
        uniform = uniform && most == least;
        any = any || most > 0;
        unit.expected[k] = most > 0 && least > 0 ? 1 : 0;
      }
      unit.pending = 0;
      for (char expected : unit.expected) unit.pending += expected;
      unit.mode = !any ? Mode::none : uniform ? Mode::in_backward : Mode::after_backward;
    }
    armed_ = true;
  }

  void after_backward(const std::vector<ReachedModel>& models) override {
    armed_ = false;
    for (auto& unit : units_) {
      // A unit whose hooks did not all run (a gradient that autograd did
      // not accumulate after all) is reduced here, as on every rank.
      if (unit.mode == Mode::after_backward || (unit.mode == Mode::in_backward && unit.pending > 0)) {
        reduce_scatter_unit(unit);
      }
      unit.mode = Mode::none;
    }
    finish_scatter();
    materializer_.release_all();
    for (const auto& reached : models) {
      if (!reached.synchronized) continue;
      Model* model = find(reached.module);
      if (model == nullptr) continue;
      finish_reduction(*model);
    }
    hint_gradient_reads(models);
  }

  void module_loaded(const torch::nn::Module& module) override {
    drop_prefetch();
    ZeroStrategy::module_loaded(module);
    materializer_.release_all();  // the loaded values into the shards
  }

  int owner_of(const at::Tensor& parameter) const override {
    if (!context_.group) return -1;
    const auto found = index_.find(parameter.unsafeGetTensorImpl());
    return found == index_.end() || !parameters_[found->second].trained ? -1 : parameters_[found->second].owner;
  }

  std::function<void()> make_parameters_readable() override {
    if (!context_.group) return {};
    drop_prefetch();
    materializer_.pin_all();
    return [this] { materializer_.unpin_all(); };
  }

  std::function<void()> hold_owned_state(const std::vector<torch::optim::Optimizer*>& optimizers) override {
    if (!context_.group) return {};
    drop_prefetch();
    auto undo = std::make_shared<std::vector<std::function<void()>>>();
    const auto undo_all = [undo] {
      for (auto step = undo->rbegin(); step != undo->rend(); ++step) (*step)();
      undo->clear();
    };
    try {
      for (const auto& unit : units_) {
        std::vector<bool> kept;
        for (size_t index : unit.members) kept.push_back(parameters_[index].owner == context_.rank);
        materializer_.materialize(unit.group);
        // Memory of their own: kept parameters pointing into the gathered
        // buffer would keep the whole unit alive.
        for (size_t k = 0; k < kept.size() && unit.zero_copy; ++k) {
          if (kept[k]) own_memory(parameters_[unit.members[k]].tensor);
        }
        materializer_.set_kept(unit.group, kept);
        materializer_.release(unit.group);
        undo->push_back([this, group = unit.group] { materializer_.set_kept(group, {}); });
      }
      for (auto* optimizer : optimizers) undo->push_back(whole_states_on_owners(*optimizer));
    } catch (...) {
      undo_all();
      throw;
    }
    return undo_all;
  }

  std::function<void()> gather_optimizer_state(torch::optim::Optimizer& optimizer) override {
    check_in_sync("fabric.save()");
    if (!context_.group) return {};
    const auto restore = whole_states_on_owners(optimizer);
    std::function<void()> undo;
    try {
      undo = ZeroStrategy::gather_optimizer_state(optimizer);
    } catch (...) {
      restore();
      throw;
    }
    return [undo, restore] {
      if (undo) undo();
      restore();
    };
  }

  // The optimizer holds whole states (a checkpoint's): each rank keeps its
  // pieces of them.
  void optimizer_loaded(torch::optim::Optimizer& optimizer) override {
    if (!context_.group) {
      ZeroStrategy::optimizer_loaded(optimizer);
      return;
    }
    drop_prefetch();
    cut_states_.clear();  // the loaded states are new objects
    cut_states_to_pieces(optimizer);
  }

 protected:
  bool updates_here(size_t index) const override {
    if (!context_.group) return ZeroStrategy::updates_here(index);
    return index < pieces_.size() && pieces_[index].length > 0;
  }

  void step_owned(torch::optim::Optimizer& optimizer) override {
    if (!context_.group) {
      optimizer.step();
      return;
    }
    drop_prefetch();  // the step changes the shards
    // Nothing resident keeps the old values after the step (a release
    // copies a chunk into its shard: done now, before the shard changes).
    materializer_.release_all();
    cut_states_to_pieces(optimizer);
    // Each parameter with a piece here is that piece of the shard while the
    // optimizer steps it (its gradient is the same piece already); the
    // others have no gradient and are skipped.
    StorageMaterializer::Pause pause;
    std::vector<std::pair<at::Tensor, at::Tensor>> swapped;  // parameter, itself whole
    // In reverse: a parameter listed twice is restored to itself last.
    const auto restore = [&swapped] {
      for (auto entry = swapped.rbegin(); entry != swapped.rend(); ++entry) entry->first.set_data(entry->second);
    };
    try {
      for (const auto& parameter : optimizer_parameters(optimizer)) {
        const Parameter* tracked = lookup(parameter);
        if (tracked == nullptr) continue;
        const size_t index = static_cast<size_t>(tracked - parameters_.data());
        if (!updates_here(index) || !parameter.grad().defined()) continue;
        const Piece& piece = pieces_[index];
        const Flat& flat = units_[piece.unit].flats[piece.flat];
        at::Tensor handle = parameter;  // the same TensorImpl
        // Its metadata over the released storage (detach: set_ would give
        // the storage bytes again).
        swapped.emplace_back(handle, parameter.detach());
        handle.set_data(flat.shard.narrow(0, piece.in_shard, piece.length));
      }
      optimizer.step();
    } catch (...) {
      restore();
      throw;
    }
    restore();
  }

 private:
  enum class Mode { none, in_backward, after_backward };
  struct FsdpUnit {
    size_t model = 0;  // index into models_
    int unit = 0;      // within the model
    std::string name;
    std::vector<size_t> members;  // indices into parameters_
    std::vector<Flat> flats;      // one per dtype
    size_t group = 0;             // the materializer's
    bool zero_copy = false;       // the fill points the storages into the gathered buffer
    // The members' versions when the last fill ended (empty: unknown). A
    // release copies the values back only when one moved (a load wrote
    // them); reads in forward and backward move none.
    std::vector<int64_t> filled_versions;
    // This backward: which members every rank reaches, how many of those
    // have not been accumulated yet, and when the unit is reduced.
    std::vector<char> expected;
    int64_t pending = 0;
    Mode mode = Mode::none;
  };
  const ReachedModel* reached_model(const std::vector<ReachedModel>& models, size_t model) const {
    for (const auto& reached : models) {
      if (reached.module != nullptr && reached.module == models_[model].module) return &reached;
    }
    return nullptr;
  }

  // The `member`th parameter of unit `unit`, parameters_[index], tells the
  // strategy when its gradient has been accumulated.
  void hook_accumulation(size_t index, size_t unit, size_t member) {
    hooked_.emplace_back(unit, member);
    hooks_.add(parameters_[index].tensor, hooked_.size() - 1);
  }

  // A member's gradient has been accumulated by this backward.
  void accumulated(size_t u, size_t member) {
    if (!armed_ || u >= units_.size()) return;
    FsdpUnit& unit = units_[u];
    if (unit.mode != Mode::in_backward || member >= unit.expected.size() || unit.expected[member] == 0) return;
    unit.expected[member] = 0;
    if (--unit.pending > 0) return;
    reduce_scatter_unit(unit);
    unit.mode = Mode::none;
    materializer_.release(unit.group);
  }

  // A unit's reduce-scatter while it is in flight: started by the hook of
  // the unit's last gradient, finished when the next unit's starts or when
  // backward ends, so that the transfer overlaps the backward of the units
  // before it (as ddp's buckets overlap theirs).
  struct ScatterInFlight {
    struct PerFlat {
      at::Tensor buffer;               // one segment per rank: the gradients, then a flag per member
      at::Tensor output;               // this rank's segment, summed (c10d's flat reduce-scatter)
      at::Tensor received;             // else the other ranks' copies of this rank's segment
      std::vector<at::Tensor> pooled;  // what buffers_ gave for `buffer` and `received`
      std::vector<c10d_compat::WorkPtr> works;
    };
    size_t unit = 0;
    std::vector<PerFlat> flats;
  };

  // Sums the unit's gradients over the ranks, each rank receiving its
  // chunk, which it divides by the world size. Every chunk carries, after
  // the gradients, one flag per member (1 where the rank has a gradient),
  // so a parameter no rank reached keeps an undefined gradient. The whole
  // gradients are dropped as they go into the buffer; a member's gradient
  // becomes this rank's piece when the transfer is finished.
  void reduce_scatter_unit(FsdpUnit& unit) {
    finish_scatter();
    ScatterInFlight started;
    started.unit = static_cast<size_t>(&unit - units_.data());
    const int64_t world = context_.world_size;
    for (auto& flat : unit.flats) {
      const auto count = static_cast<int64_t>(flat.members.size());
      const int64_t segment = flat.chunk + count;
      const auto options = at::TensorOptions().dtype(flat.dtype).device(context_.device);
      // Only what no gradient covers is zeroed (the padding, the ranges of
      // parameters without a gradient): a unit-sized memset is not free.
      at::Tensor pooled = buffers_->take(segment * world, options);
      auto buffer = pooled.narrow(0, 0, segment * world);
      for (int64_t r = 0; r < world; ++r) {
        const int64_t valid = std::min(flat.chunk, std::max<int64_t>(0, flat.total - r * flat.chunk));
        if (valid < flat.chunk) buffer.narrow(0, r * segment + valid, flat.chunk - valid).zero_();
      }
      std::vector<float> flags(static_cast<size_t>(count), 0.0f);
      for (int64_t k = 0; k < count; ++k) {
        auto& parameter = parameters_[flat.members[static_cast<size_t>(k)]].tensor;
        const at::Tensor gradient = parameter.grad();
        if (gradient.defined()) flags[static_cast<size_t>(k)] = 1;
        const auto elements = gradient.defined() ? gradient.reshape({-1}) : at::Tensor();
        const int64_t first = flat.offsets[static_cast<size_t>(k)];
        const int64_t last = first + parameter.numel();
        for (int64_t r = first / flat.chunk; r * flat.chunk < last; ++r) {
          const int64_t begin = std::max(first, r * flat.chunk);
          const int64_t end = std::min(last, (r + 1) * flat.chunk);
          auto target = buffer.narrow(0, r * segment + begin - r * flat.chunk, end - begin);
          if (elements.defined()) {
            target.copy_(elements.narrow(0, begin - first, end - begin));
          } else {
            target.zero_();
          }
        }
        parameter.mutable_grad() = at::Tensor();  // freed as soon as it is in the buffer
      }
      const auto flag_values = at::tensor(flags).to(options);
      for (int64_t r = 0; r < world; ++r) buffer.narrow(0, r * segment + flat.chunk, count).copy_(flag_values);
      started.flats.push_back(start_reduce_scatter(buffer, segment));
      started.flats.back().pooled.push_back(std::move(pooled));
    }
    scatter_in_flight_ = std::move(started);
  }

  // The reduce-scatter in flight, if any: waited for; each member holding
  // a piece here gets its averaged piece as its gradient.
  void finish_scatter() {
    if (!scatter_in_flight_) return;
    ScatterInFlight finished = std::move(*scatter_in_flight_);
    scatter_in_flight_.reset();
    FsdpUnit& unit = units_.at(finished.unit);
    const int64_t world = context_.world_size;
    for (size_t f = 0; f < unit.flats.size(); ++f) {
      Flat& flat = unit.flats[f];
      auto& transfer = finished.flats.at(f);
      for (auto& work : transfer.works) work->wait();
      const auto count = static_cast<int64_t>(flat.members.size());
      const int64_t segment = flat.chunk + count;
      at::Tensor mine = transfer.output;
      if (!mine.defined()) {
        mine = transfer.buffer.narrow(0, context_.rank * segment, segment);
        for (int64_t k = 0; k < world - 1; ++k) mine.add_(transfer.received.narrow(0, k * segment, segment));
      }
      const at::Tensor gradients = mine.narrow(0, 0, flat.chunk).div_(static_cast<double>(world));
      const auto reached = mine.narrow(0, flat.chunk, count).to(at::kFloat).cpu().contiguous();
      const float* reached_by = reached.data_ptr<float>();
      for (int64_t k = 0; k < count; ++k) {
        const size_t index = flat.members[static_cast<size_t>(k)];
        const Piece& piece = pieces_[index];
        if (piece.length == 0 || reached_by[k] <= 0) continue;
        // A tensor of its own, not a view: optimizer.zero_grad() detaches
        // gradients in place, and a piece must not keep the buffer alive.
        parameters_[index].tensor.mutable_grad() = gradients.narrow(0, piece.in_shard, piece.length).clone();
      }
      for (auto& buffer : transfer.pooled) buffers_->give_back(std::move(buffer));
    }
  }

  // A backend's refusal of a collective it does not have (Gloo in 1.13),
  // made before anything is sent, on every rank alike.
  static bool refused_as_unsupported(const c10::Error& error) {
    const std::string what = error.what();
    return what.find("does not support") != std::string::npos || what.find("no support") != std::string::npos;
  }

  // Starts summing `buffer`'s segments (one per rank) over the ranks, each
  // rank to receive its own: c10d's flat reduce-scatter (NCCL), else each
  // segment sent straight to its rank (c10d send/recv), which adds what it
  // receives when finished: (N-1)/N of the buffer per rank, as a
  // reduce-scatter moves. Gloo's reduce, one per segment, moved about twice
  // that (it reduces in a ring and then gathers to the root).
  ScatterInFlight::PerFlat start_reduce_scatter(const at::Tensor& buffer, int64_t segment) {
    ScatterInFlight::PerFlat transfer;
    transfer.buffer = buffer;
    if (!reduce_scatter_unavailable_) {
      transfer.output = at::empty({segment}, buffer.options());
      c10d::ReduceScatterOptions options;
      options.reduceOp = c10d::ReduceOp::SUM;
      try {
        transfer.works.push_back(context_.group->_reduce_scatter_base(transfer.output, transfer.buffer, options));
        return transfer;
      } catch (const c10::Error& error) {
        if (!refused_as_unsupported(error)) throw;
        reduce_scatter_unavailable_ = true;
        transfer.output = at::Tensor();
      }
    }
    // At most one reduce-scatter is in flight, and each sends one segment
    // to each other rank, so one tag serves every transfer.
    constexpr int kTag = 0;
    const int world = context_.world_size;
    transfer.pooled.push_back(buffers_->take((world - 1) * segment, buffer.options()));
    transfer.received = transfer.pooled.back().narrow(0, 0, (world - 1) * segment);
    for (int r = 0, k = 0; r < world; ++r) {
      if (r == context_.rank) continue;
      std::vector<at::Tensor> outgoing{transfer.buffer.narrow(0, r * segment, segment)};
      transfer.works.push_back(context_.group->send(outgoing, r, kTag));
      std::vector<at::Tensor> incoming{transfer.received.narrow(0, (k++) * segment, segment)};
      transfer.works.push_back(context_.group->recv(incoming, r, kTag));
    }
    return transfer;
  }

  // Every rank's `shard` into `gathered`, in rank order: c10d's flat
  // all-gather (NCCL), else one broadcast per rank into its part of
  // `gathered` (Gloo's list all-gather would stage the whole unit in a
  // buffer of its own and copy it out).
  std::vector<c10d_compat::WorkPtr> start_all_gather(at::Tensor& gathered, at::Tensor& shard) {
    if (!all_gather_unavailable_) {
      try {
        return {context_.group->_allgather_base(gathered, shard)};
      } catch (const c10::Error& error) {
        if (!refused_as_unsupported(error)) throw;
        all_gather_unavailable_ = true;
      }
    }
    const int64_t chunk = shard.numel();
    std::vector<c10d_compat::WorkPtr> works;
    for (int r = 0; r < context_.world_size; ++r) {
      std::vector<at::Tensor> tensors{gathered.narrow(0, r * chunk, chunk)};
      if (r == context_.rank) tensors[0].copy_(shard);
      c10d::BroadcastOptions options;
      options.rootRank = r;
      works.push_back(context_.group->broadcast(tensors, options));
    }
    return works;
  }

  // Starts gathering unit `unit` (prefetch), when it is one.
  void start_prefetch(size_t unit) {
    if (unit >= units_.size()) return;
    GatherInFlight started;
    started.unit = unit;
    for (auto& flat : units_[unit].flats) {
      const int64_t numel = flat.chunk * context_.world_size;
      started.pooled.push_back(buffers_->take(numel, flat.shard.options()));
      at::Tensor gathered = started.pooled.back().narrow(0, 0, numel);
      for (auto& work : start_all_gather(gathered, flat.shard)) started.works.push_back(std::move(work));
    }
    gather_in_flight_ = std::move(started);
  }

  // The prefetch in flight, if any, is not used: waited for (every rank
  // started it), its buffers back to the pool. Called where shards may
  // change, so that no gather of old values is ever used.
  void drop_prefetch() {
    if (!gather_in_flight_) return;
    GatherInFlight dropped = std::move(*gather_in_flight_);
    gather_in_flight_.reset();
    for (auto& work : dropped.works) work->wait();
    for (auto& buffer : dropped.pooled) buffers_->give_back(std::move(buffer));
  }

  // How many of parameters_[index]'s elements rank `rank` holds.
  int64_t piece_length(size_t index, int rank) const {
    const Piece& piece = pieces_.at(index);
    const Flat& flat = units_.at(piece.unit).flats.at(piece.flat);
    const int64_t begin = std::max<int64_t>(rank * flat.chunk, piece.in_flat);
    const int64_t end = std::min<int64_t>((rank + 1) * flat.chunk, piece.in_flat + parameters_[index].tensor.numel());
    return std::max<int64_t>(0, end - begin);
  }

  // States of parameters holding a piece here that are whole (loaded, or
  // made when the optimizer was built) are cut to the piece; states of the
  // others are dropped.
  void cut_states_to_pieces(torch::optim::Optimizer& optimizer) {
    if (!context_.group) return;
    for (const auto& parameter : optimizer_parameters(optimizer)) {
      const Parameter* tracked = lookup(parameter);
      if (tracked == nullptr || !tracked->trained) continue;
      const size_t index = static_cast<size_t>(tracked - parameters_.data());
      if (index >= pieces_.size()) continue;  // not in a unit yet
      const auto key = c10d_compat::optimizer_state_key(optimizer, parameter);
      auto found = optimizer.state().find(key);
      if (found == optimizer.state().end() || cut_states_.count(found->second.get()) > 0) continue;
      if (!updates_here(index)) {
        optimizer.state().erase(found);
        continue;
      }
      const Piece piece = pieces_[index];
      const auto sizes = parameter.sizes().vec();
      found->second = change_state_tensors(optimizer, *found->second, [&](const at::Tensor& tensor) {
        if (tensor.sizes().vec() != sizes) return tensor;
        return tensor.reshape({-1}).narrow(0, piece.in_parameter, piece.length).clone();
      });
      cut_states_.insert(found->second.get());
    }
  }

  // Collective. Each parameter's owner holds its whole optimizer state,
  // joined from the ranks' pieces; the other ranks none. The returned
  // function puts the pieces back.
  std::function<void()> whole_states_on_owners(torch::optim::Optimizer& optimizer) {
    cut_states_to_pieces(optimizer);
    const auto parameters = optimizer_parameters(optimizer);
    using Key = decltype(c10d_compat::optimizer_state_key(optimizer, parameters.front()));
    auto pieces = std::make_shared<std::vector<std::pair<Key, std::unique_ptr<torch::optim::OptimizerParamState>>>>();
    std::vector<std::pair<Key, std::unique_ptr<torch::optim::OptimizerParamState>>> whole;
    for (int owner = 0; owner < context_.world_size; ++owner) {
      const auto blobs = gather_to(owner, serialize_states(optimizer, parameters, [&](size_t i) {
                                     const Parameter* tracked = lookup(parameters[i]);
                                     return tracked != nullptr && tracked->trained && tracked->owner == owner;
                                   }));
      if (context_.rank != owner) continue;
      // Per position, each rank's piece in rank order (rank r's piece of a
      // parameter comes before rank r + 1's).
      std::map<int64_t, std::vector<std::pair<int, std::shared_ptr<torch::serialize::InputArchive>>>> parts;
      for (int r = 0; r < context_.world_size; ++r) {
        for (auto& [position, nested] : read_states(blobs[static_cast<size_t>(r)])) {
          parts[position].emplace_back(r, nested);
        }
      }
      for (auto& [position, ranks] : parts) {
        const at::Tensor& parameter = parameters.at(static_cast<size_t>(position));
        torch::serialize::OutputArchive joined;
        const size_t index = static_cast<size_t>(lookup(parameter) - parameters_.data());
        for (const auto& key : ranks.front().second->keys()) {
          // A rank's piece: 1-D, as long as its piece of the parameter.
          std::vector<at::Tensor> elements;
          c10::IValue first;
          int64_t numel = 0;
          bool others = false;
          for (auto& [r, part] : ranks) {
            c10::IValue value;
            if (!part->try_read(key, value)) continue;
            if (first.isNone()) first = value;
            const int64_t length = piece_length(index, r);
            if (length > 0 && value.isTensor() && value.toTensor().defined() && value.toTensor().dim() == 1 &&
                value.toTensor().numel() == length) {
              elements.push_back(value.toTensor());
              numel += length;
            } else {
              others = true;
            }
          }
          if (elements.empty()) {
            joined.write(key, first);  // the same on every rank (a step count)
            continue;
          }
          // Never one rank's piece saved as the whole.
          if (others || numel != parameter.numel()) {
            throw std::runtime_error("fabric: strategy 'fsdp': the ranks' pieces of the optimizer state '" + key +
                                     "' of parameter '" + parameters_[index].name + "' hold " + std::to_string(numel) +
                                     " of its " + std::to_string(parameter.numel()) +
                                     " elements, so it cannot be saved whole (is the optimizer in the State twice?)");
          }
          joined.write(key, c10::IValue(at::cat(elements).view(parameter.sizes())));
        }
        whole.emplace_back(c10d_compat::optimizer_state_key(optimizer, parameter), state_of_archive(optimizer, joined));
      }
    }
    // Every rank's pieces aside; the owners' whole states in.
    for (const auto& parameter : parameters) {
      const Parameter* tracked = lookup(parameter);
      if (tracked == nullptr || !tracked->trained) continue;
      const auto key = c10d_compat::optimizer_state_key(optimizer, parameter);
      auto found = optimizer.state().find(key);
      if (found == optimizer.state().end()) continue;
      pieces->emplace_back(key, std::move(found->second));
      optimizer.state().erase(found);
    }
    for (auto& [key, state] : whole) optimizer.state()[key] = std::move(state);
    return [&optimizer, pieces, this] {
      for (const auto& parameter : optimizer_parameters(optimizer)) {
        const Parameter* tracked = lookup(parameter);
        if (tracked != nullptr && tracked->trained)
          optimizer.state().erase(c10d_compat::optimizer_state_key(optimizer, parameter));
      }
      for (auto& [key, state] : *pieces) optimizer.state()[key] = std::move(state);
      pieces->clear();
      cut_states_.clear();  // the whole states' addresses are free again
    };
  }

  // LibTorch logs and swallows what a RecordFunction callback throws, and
  // the operator would then read unfilled bytes: a fill that fails ends the
  // process with the reason instead (the launcher then ends the job).
  void fill(size_t group) {
    try {
      fill_or_throw(group);
    } catch (const std::exception& error) {
      write_stderr_line("fabric: rank " + std::to_string(context_.rank) + ": " + first_line_of(error.what()) +
                        " (ending this process: the model's parameters cannot be brought back)");
      std::fflush(nullptr);
      std::_Exit(1);
    }
  }

  // Brings unit `group` back on every rank: checks that every rank is
  // bringing back the same unit, then all-gathers each flat's shards and
  // copies them into the parameters' fresh storages.
  void fill_or_throw(size_t group) {
    FsdpUnit& unit = units_.at(group);
    const auto [most_of, least_of] = max_and_min_across_ranks({static_cast<int64_t>(group)});
    const int64_t most = most_of[0];
    const int64_t least = least_of[0];
    if (most != least) {
      throw std::runtime_error(
          "fabric: strategy 'fsdp': the ranks are bringing back different units of sharded parameters (rank " +
          std::to_string(context_.rank) + ": unit #" + std::to_string(group) + ", " + unit.name +
          "; the ranks' units range from #" + std::to_string(least) + " to #" + std::to_string(most) +
          "): every rank must run the same operators on the model in the same order (as ddp needs the same "
          "backward passes): does the forward branch on this rank's data, or run a part of the model on some "
          "ranks only?");
    }
    // The unit's gather, when the fill before started it; else now.
    std::optional<GatherInFlight> prefetched;
    if (gather_in_flight_ && gather_in_flight_->unit == group) {
      prefetched = std::move(gather_in_flight_);
      gather_in_flight_.reset();
      for (auto& work : prefetched->works) work->wait();
    }
    drop_prefetch();
    for (size_t f = 0; f < unit.flats.size(); ++f) {
      Flat& flat = unit.flats[f];
      const int64_t gathered_numel = flat.chunk * context_.world_size;
      at::Tensor pooled =
          prefetched ? std::move(prefetched->pooled[f]) : buffers_->take(gathered_numel, flat.shard.options());
      auto gathered = pooled.narrow(0, 0, gathered_numel);
      if (!prefetched) {
        for (auto& work : start_all_gather(gathered, flat.shard)) work->wait();
      }
      // The members' storages share the buffer; it goes back to the pool
      // when the last of them is released.
      const std::shared_ptr<void> lease = unit.zero_copy ? buffers_->share(pooled) : nullptr;
      for (size_t k = 0; k < flat.members.size(); ++k) {
        const at::Tensor& member = parameters_[flat.members[k]].tensor;
        if (unit.zero_copy) {
          // The storage points into the buffer, which lives while any
          // of the unit's storages does. One with bytes was kept (its
          // values are current, in memory of its own).
          c10::StorageImpl* storage = member.storage().unsafeGetStorageImpl();
          if (storage->nbytes() > 0) continue;
          const size_t bytes = static_cast<size_t>(member.numel()) * member.element_size();
          char* data = static_cast<char*>(gathered.data_ptr()) + flat.offsets[k] * member.element_size();
          storage->set_data_ptr_noswap(
              c10::DataPtr(data, new std::shared_ptr<void>(lease), &release_lease, gathered.device()));
          storage->set_nbytes(bytes);
          continue;
        }
        at::Tensor parameter = same_memory_own_version(member);
        parameter.copy_(gathered.narrow(0, flat.offsets[k], parameter.numel()).view(parameter.sizes()));
      }
      if (!unit.zero_copy) buffers_->give_back(std::move(pooled));
    }
    unit.filled_versions.clear();
    for (size_t index : unit.members) unit.filled_versions.push_back(parameters_[index].tensor._version());
    // The unit expected next: backward runs the units in reverse.
    start_prefetch(armed_ ? group - 1 : group + 1);
  }

  static void release_lease(void* lease) { delete static_cast<std::shared_ptr<void>*>(lease); }

  // `parameter`'s storage gets memory of its own, with the same values.
  static void own_memory(const at::Tensor& parameter) {
    StorageMaterializer::Pause pause;
    const at::Tensor copy = same_memory_own_version(parameter).clone(at::MemoryFormat::Contiguous);
    at::DataPtr data = copy.storage().unsafeGetStorageImpl()->set_data_ptr(at::DataPtr(nullptr, copy.device()));
    parameter.storage().unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(data));
  }

  // Before unit `group` is released: this rank's chunk of its values into
  // the shard, unless no member was written since the fill.
  void write_back(size_t group) {
    FsdpUnit& unit = units_.at(group);
    bool written = unit.filled_versions.size() != unit.members.size();
    for (size_t k = 0; k < unit.members.size() && !written; ++k) {
      written = parameters_[unit.members[k]].tensor._version() != unit.filled_versions[k];
    }
    unit.filled_versions.clear();
    if (!written) return;
    drop_prefetch();  // its shard is about to change
    for (auto& flat : unit.flats) {
      for (size_t index : flat.members) {
        const Piece& piece = pieces_[index];
        if (piece.length == 0) continue;
        const at::Tensor values = same_memory_own_version(parameters_[index].tensor).reshape({-1});
        flat.shard.narrow(0, piece.in_shard, piece.length).copy_(values.narrow(0, piece.in_parameter, piece.length));
      }
    }
  }

  // Each value's largest and smallest over the ranks, in one MAX all-reduce
  // of the values and their negations.
  std::pair<std::vector<int64_t>, std::vector<int64_t>> max_and_min_across_ranks(const std::vector<int64_t>& values) {
    std::vector<int64_t> both(values);
    for (int64_t value : values) both.push_back(-value);
    std::vector<at::Tensor> tensors{at::tensor(both, at::kLong).to(context_.device)};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::MAX;
    context_.group->allreduce(tensors, options)->wait();
    const auto agreed = tensors[0].cpu().contiguous();
    const int64_t* reduced = agreed.data_ptr<int64_t>();
    std::vector<int64_t> most(reduced, reduced + values.size());
    std::vector<int64_t> least;
    for (size_t i = 0; i < values.size(); ++i) least.push_back(-reduced[values.size() + i]);
    return {most, least};
  }

  // A tensor over `parameter`'s memory with a version counter of its own:
  // writing the gathered values through it leaves the parameter's version
  // as it was. (Through `detach()`, which shares it, a unit brought back in
  // the backward would look modified in place to every autograd node that
  // saved one of its other weights.)
  static at::Tensor same_memory_own_version(const at::Tensor& parameter) {
    at::Tensor alias = at::empty({0}, parameter.options().requires_grad(false));
    alias.set_(parameter.storage(), parameter.storage_offset(), parameter.sizes(), parameter.strides());
    return alias;
  }

  std::vector<std::pair<size_t, size_t>> hooked_;  // by hook key: (unit, member)
  AccumulationHooks hooks_;
  std::vector<FsdpUnit> units_;
  std::vector<Piece> pieces_;  // by index into parameters_ (length 0: none here)
  std::unordered_set<const torch::optim::OptimizerParamState*> cut_states_;  // already piece-sized
  bool armed_ = false;
  std::shared_ptr<UnitBufferPool> buffers_ = std::make_shared<UnitBufferPool>();
  std::optional<ScatterInFlight> scatter_in_flight_;
  // A unit's gather started by the fill before it (prefetch).
  struct GatherInFlight {
    size_t unit = 0;
    std::vector<at::Tensor> pooled;  // per flat: the buffer, from buffers_
    std::vector<c10d_compat::WorkPtr> works;
  };
  std::optional<GatherInFlight> gather_in_flight_;
  bool reduce_scatter_unavailable_ = false;
  bool all_gather_unavailable_ = false;
  StorageMaterializer materializer_;
};

}  // namespace

std::unique_ptr<Strategy> make_fsdp_strategy(const StrategyContext& context) {
  return std::make_unique<FsdpStrategy>(context);
}

}  // namespace detail
}  // namespace fabric
