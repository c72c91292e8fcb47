// The "fsdp" strategy (ZeRO stage 3; aliases "zero3", "deepspeed_stage_3").
//
// zero2's ownership (each trained parameter has one owner rank, which alone
// keeps its optimizer state and its averaged gradient) plus the parameters
// themselves: a rank keeps the bytes of the parameters it owns and releases
// the others'. Parameters are grouped into units by an auto-wrap policy
// (Options::fsdp_min_num_params, Lightning's min_num_params).
//
//   forward   the first operator that reads a released unit brings it back:
//             the StorageMaterializer's callback allocates its storages and
//             the fill broadcasts each parameter from its owner (the
//             all-gather); the unit resident before it is released then
//             (reshard after forward).
//   backward  autograd's saved views read the unit again, which brings it
//             back the same way; when the last of a unit's gradients has
//             been accumulated (a post hook on each parameter's
//             AccumulateGrad node), its buckets are reduced to their owners
//             and the unit is released, so at most about one unit's
//             parameters and gradients are whole at a time.
//   step      each rank steps the parameters it owns (their bytes were kept)
//             with the callback paused; nothing is broadcast: the next
//             forward gathers the new values.
//
// Every rank must bring units back in the same order (the same operators on
// the model, as ddp requires the same backward passes): each fill first
// checks that with a small all-reduce and ends the process, with the
// reason, when ranks differ.
#include "utilities/messages.h"
#include "strategies/storage_materializer.h"
#include "strategies/strategy_sharded.h"

#include <torch/csrc/autograd/function_hook.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <atomic>
#include <memory>

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

class FsdpStrategy : public ShardedStrategy {
 public:
  explicit FsdpStrategy(const StrategyContext& context)
      : ShardedStrategy(context, 3),
        hooks_(std::make_shared<HookTarget>(HookTarget{this})),
        materializer_([this](size_t group) { fill(group); }) {
    materializer_.set_release_others_on_demand(true);
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
  // other ranks own stay released: no collective can run any more, and
  // unfilled bytes would be silent garbage.
  ~FsdpStrategy() override {
    hooks_->strategy = nullptr;
    materializer_.abandon();
  }

  // Every rank is in ~Fabric: the model is whole again on every rank, for
  // code that uses it after the Fabric is gone.
  void before_shutdown() override {
    if (!context_.group) return;
    materializer_.set_release_others_on_demand(false);
    materializer_.materialize_all();
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
    for (size_t u = 0; u < found.size(); ++u) {
      for (const auto& tensor : found[u].members) unit_of_[tensor.unsafeGetTensorImpl()] = static_cast<int>(u);
    }
    ShardedStrategy::setup_module(module, trained);
    const size_t model = models_.size() - 1;
    if (!context_.group) return;  // one process: nothing to shard

    for (size_t u = 0; u < found.size(); ++u) {
      FsdpUnit unit;
      unit.model = model;
      unit.unit = static_cast<int>(u);
      unit.name = found[u].name.empty() ? "(the model's own parameters)" : "'" + found[u].name + "'";
      std::vector<at::Tensor> tensors;
      std::vector<bool> kept;
      for (const auto& tensor : found[u].members) {
        const Parameter* tracked = lookup(tensor);
        if (tracked == nullptr) continue;
        const size_t index = static_cast<size_t>(tracked - parameters_.data());
        unit.members.push_back(index);
        tensors.push_back(tensor);
        kept.push_back(tracked->owner == context_.rank);
        hook_accumulation(index, units_.size(), unit.members.size() - 1);
      }
      if (unit.members.empty()) continue;
      unit.group = materializer_.add_group(tensors, kept);
      units_.push_back(std::move(unit));
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
          "from the gradients of all parameters, and under 'fsdp' each rank holds and updates only the "
          "parameters it owns. Use strategy 'ddp' with LBFGS");
    }
  }

  bool needs_reached_models() const override { return !models_.empty(); }

  // Which units' gradients are reduced as their backward ends: those whose
  // parameters every rank's backward reaches alike (one small all-reduce of
  // per-parameter flags); the others are reduced after backward, in unit
  // order, with zero2's per-parameter flags.
  void before_backward(const std::vector<ReachedModel>& models, const at::Tensor& loss) override {
    ShardedStrategy::before_backward(models, loss);
    if (!context_.group || units_.empty()) return;
    std::vector<int64_t> flags;
    for (const auto& unit : units_) {
      const ReachedModel* reached = reached_model(models, unit.model);
      for (size_t index : unit.members) {
        const bool reaches = reached != nullptr && reached->synchronized && reached->graph != nullptr &&
                             reached->graph->reaches(parameters_[index].tensor);
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
        reduce_buckets(models_[unit.model], unit.unit);
      }
      unit.mode = Mode::none;
    }
    materializer_.release_all();
    for (const auto& reached : models) {
      if (!reached.synchronized) continue;
      Model* model = find(reached.module);
      if (model == nullptr) continue;
      if (!context_.group) reduce_buckets(*model, -1);
      finish_reduction(*model);
    }
  }

  void module_loaded(const torch::nn::Module& module) override {
    ShardedStrategy::module_loaded(module);
    materializer_.release_all();
  }

  int owner_of(const at::Tensor& parameter) const override {
    if (!context_.group) return -1;
    const auto found = index_.find(parameter.unsafeGetTensorImpl());
    return found == index_.end() || !parameters_[found->second].trained ? -1 : parameters_[found->second].owner;
  }

  std::function<void()> make_parameters_readable() override {
    if (!context_.group) return {};
    materializer_.pin_all();
    return [this] { materializer_.unpin_all(); };
  }

 protected:
  void step_owned(torch::optim::Optimizer& optimizer) override {
    // Only owned parameters have gradients now, and their bytes were kept:
    // reading them must not start a fill on this rank alone.
    StorageMaterializer::Pause pause;
    optimizer.step();
    // A unit something read since backward is resident with the old values
    // of the parameters other ranks own: the next read gathers the new ones.
    materializer_.release_all();
  }

 private:
  enum class Mode { none, in_backward, after_backward };
  struct FsdpUnit {
    size_t model = 0;  // index into models_
    int unit = 0;      // within the model (its buckets')
    std::string name;
    std::vector<size_t> members;  // indices into parameters_
    size_t group = 0;             // the materializer's
    // This backward: which members every rank reaches, how many of those
    // have not been accumulated yet, and when the unit is reduced.
    std::vector<char> expected;
    int64_t pending = 0;
    Mode mode = Mode::none;
  };
  // What the AccumulateGrad post hooks call; outlives the strategy (the
  // hooks stay on the nodes), which clears `strategy` when destroyed.
  struct HookTarget {
    FsdpStrategy* strategy;
  };
  class AccumulatedHook : public torch::autograd::FunctionPostHook {
   public:
    AccumulatedHook(std::weak_ptr<HookTarget> target, size_t unit, size_t member)
        : target_(std::move(target)), unit_(unit), member_(member) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                              const torch::autograd::variable_list& inputs) override {
      (void)inputs;
      if (auto target = target_.lock()) {
        if (target->strategy != nullptr) target->strategy->accumulated(unit_, member_);
      }
      return outputs;
    }

   private:
    std::weak_ptr<HookTarget> target_;
    size_t unit_;
    size_t member_;
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
    auto accumulator = torch::autograd::impl::grad_accumulator(parameters_[index].tensor);
    accumulator->add_post_hook(std::make_unique<AccumulatedHook>(hooks_, unit, member));
    accumulators_.push_back(std::move(accumulator));  // the tensor holds its node only weakly
  }

  // A member's gradient has been accumulated by this backward.
  void accumulated(size_t u, size_t member) {
    if (!armed_ || u >= units_.size()) return;
    FsdpUnit& unit = units_[u];
    if (unit.mode != Mode::in_backward || member >= unit.expected.size() || unit.expected[member] == 0) return;
    unit.expected[member] = 0;
    if (--unit.pending > 0) return;
    reduce_buckets(models_[unit.model], unit.unit);
    unit.mode = Mode::none;
    materializer_.release(unit.group);
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
  // bringing back the same unit, then broadcasts each parameter from its
  // owner into the fresh storages.
  void fill_or_throw(size_t group) {
    const FsdpUnit& unit = units_.at(group);
    const auto [most_of, least_of] = max_and_min_across_ranks({static_cast<int64_t>(group)});
    const int64_t most = most_of[0];
    const int64_t least = least_of[0];
    if (most != least) {
      throw std::runtime_error(
          "fabric: strategy 'fsdp': the ranks are bringing back different units of sharded parameters (rank " +
          std::to_string(context_.rank) + ": unit #" + std::to_string(group) + ", " + unit.name +
          "; the ranks' units range from #" + std::to_string(least) + " to #" + std::to_string(most) +
          "): every rank must run the same operators on the model in the same order. Was optimizer.step() called "
          "directly (use fabric.step(optimizer)), or does the forward branch on this rank's data?");
    }
    const size_t cap = bucket_bytes(context_.options).second;
    for (int owner = 0; owner < context_.world_size; ++owner) {
      std::vector<at::Tensor> owned;
      for (size_t index : unit.members) {
        if (parameters_[index].owner == owner) owned.push_back(same_memory_own_version(parameters_[index].tensor));
      }
      if (!owned.empty()) c10d::broadcast_coalesced(context_.group, owned, cap, owner);
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

  std::shared_ptr<HookTarget> hooks_;
  std::vector<FsdpUnit> units_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  bool armed_ = false;
  StorageMaterializer materializer_;
};

}  // namespace

std::unique_ptr<Strategy> make_fsdp_strategy(const StrategyContext& context) {
  return std::make_unique<FsdpStrategy>(context);
}

}  // namespace detail
}  // namespace fabric
