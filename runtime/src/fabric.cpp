#include <fabric/fabric.h>

#include "connector.h"
#include "data_sharding.h"
#include "plugins/environments/cluster_environment.h"
#include "strategies/ddp.h"
#include "strategies/strategy.h"
#include "utilities/environment_variables.h"
#include "utilities/agreement.h"
#include "utilities/sync_check.h"

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
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace fabric {
namespace detail {

// What a Fabric keeps besides its strategy (which owns the process group,
// precision and checkpoint IO): the set-up models and what it has already
// said. Only this file sees it.
// Where a tensor's values live, and as what.
struct ParameterPlace {
  const void* storage = nullptr;  // identity only, never dereferenced
  int64_t offset = 0;
  at::ScalarType dtype = at::kFloat;
  c10::Device device = c10::Device(c10::kCPU);
  std::vector<int64_t> sizes;
  static ParameterPlace of(const at::Tensor& tensor) {
    return {storage_of(tensor), tensor.storage_offset(), tensor.scalar_type(), tensor.device(), tensor.sizes().vec()};
  }
  // Read at every backward: no allocation, no reference count touched.
  bool holds(const at::Tensor& tensor) const {
    return storage == storage_of(tensor) && offset == tensor.storage_offset() && dtype == tensor.scalar_type() &&
           device == tensor.device() && tensor.sizes() == c10::IntArrayRef(sizes);
  }

 private:
  static const void* storage_of(const at::Tensor& tensor) {
    return tensor.unsafeGetTensorImpl()->storage().unsafeGetStorageImpl();
  }
};

class FabricState {
 public:
  Options options;
  int64_t log_calls = 0;
  int uncaught_exceptions_at_construction = std::uncaught_exceptions();
  std::unique_ptr<Strategy> strategy;

  Collectives& collectives() const { return strategy->collectives(); }
  const ProcessPlacement& placement() const { return strategy->collectives().placement(); }
  const torch::Device& device() const { return strategy->device(); }

  // Every set-up model. A model held by value is not owned (`owner` is
  // null) and may be destroyed before the Fabric, so nothing after setup
  // dereferences `address`: backward, the sync check and the warnings use
  // the parameter tensors kept here (the same tensors the model holds).
  // An optimizer's parameters that no set-up model owned when
  // setup_optimizer saw them are one more entry (`loose`): `owner` is a
  // module of Fabric's own that holds those tensors (LooseParameters), so
  // the strategies, backward, the loss scaler and the sync check treat them
  // as a model.
  struct SetUpModel {
    const torch::nn::Module* address = nullptr;
    std::shared_ptr<torch::nn::Module> owner;
    bool loose = false;
    NamedParameters parameters;
    // Per parameter: whether it required grad when the strategy last set up
    // the model's gradient synchronization (setup(), or a backward that
    // found the set changed: see Fabric::backward).
    std::vector<char> trained;
    // Per parameter: where its values lived when Fabric last synchronized
    // it. torch::load, Module::load, set_, set_data and Module::to give a
    // parameter new storage (LibTorch reads a checkpoint with set_, where
    // Python's load_state_dict copies in place); the gradient
    // synchronization built over the old one would no longer average it.
    std::vector<ParameterPlace> places;
    int no_sync_depth = 0;  // how many no_backward_sync guards hold it
  };
  std::vector<SetUpModel> models;
  static void record_places(SetUpModel& model) {
    model.places.clear();
    for (const auto& item : model.parameters) model.places.push_back(ParameterPlace::of(item.second));
  }
  // Whether rank 0 said that Fabric followed replaced parameters.
  bool noted_replaced_parameters = false;
  SetUpModel* find_model(const torch::nn::Module* address) {
    for (auto& model : models) {
      if (model.address == address) return &model;
    }
    return nullptr;
  }

  // The sync check (sampled by default; FABRIC_CHECK_SYNC); null when off.
  std::unique_ptr<SyncCheck> sync_check;
  // Optimizers seen to step a set-up model's parameters (never dereferenced).
  std::unordered_set<const torch::optim::Optimizer*> optimizers_known_set_up;
  // Backward passes run by this process: a loader's ShardSampler reads it to
  // tell training loaders (padded shares) from evaluation ones (exact).
  std::shared_ptr<std::atomic<uint64_t>> backward_passes = std::make_shared<std::atomic<uint64_t>>(0);
  // Backward passes that all-reduced (or reduce-scattered) a model's
  // gradients; Fabric::gradient_synchronizations.
  uint64_t gradient_synchronizations = 0;
  bool warned_step_without_setup = false;
  // Optimizers whose parameters of no set-up model became a loose entry of
  // `models` (numbers them in messages), and whether rank 0 said what that
  // leaves out (the modules' buffers).
  int loose_sets = 0;
  bool noted_loose_parameters = false;
};

// PyTorch DDP's default.
constexpr size_t kBroadcastBucketBytes = 250 * 1024 * 1024;

}  // namespace detail

Fabric::Fabric(Options options) : state_(std::make_unique<detail::FabricState>()) {
  auto& state = *state_;
  options.override_from_environment();
  state.options = options;
  // The connector resolves the options into the strategy and its plugins.
  state.strategy = detail::connect_strategy(options);
  const auto sync_check_mode = detail::SyncCheck::mode_from_environment();
  if (sync_check_mode != detail::SyncCheckMode::off)
    state.sync_check = std::make_unique<detail::SyncCheck>(sync_check_mode);
  sharding_ = std::make_unique<detail::DataSharding>(*this, world_size(), global_rank(), device());
  // fabricize verify: the seed an instrumented original takes first in
  // main, and this rank's record (nothing when FABRIC_VERIFY_RECORD is unset).
  verify::begin(global_rank(), world_size());
  verify::record_strategy(state.strategy->name());
}

CheckpointError::CheckpointError(const std::string& message)
    : c10::Error(detail::c10d_compat::error_without_backtrace(message)) {}

Fabric::~Fabric() {
  auto& state = *state_;
  const bool unwinding = std::uncaught_exceptions() > state.uncaught_exceptions_at_construction;
  detail::JobMonitor* const monitor = state.strategy->collectives().monitor();
  if (monitor) {
    // Every rank waits here until all have finished; a rank that another
    // one waits for in a collective ends the job instead (exit code 1).
    if (!unwinding) {
      monitor->finish();
      // Every rank got here: the sampled check's last comparison covers
      // the passes since its previous one (a short run, the last steps).
      if (state.sync_check && state.sync_check->due_at_end()) {
        try {
          check_sync_sampled(/*at_end=*/true);
        } catch (const std::exception& error) {
          std::fprintf(stderr, "fabric: the sync check at the end could not run: %s\n", error.what());
        }
      }
    } else if (state.placement().launcher != "fabric" &&
               !(state.placement().launcher.empty() && state.placement().local_world_size > 1)) {
      // No launcher of Fabric's watches this job's exits: ranks waiting at
      // the end learn from the store that this one will not come.
      monitor->abandon("raised an exception");
    }
  }
  if (!unwinding && monitor) {
    try {
      state.collectives().run("fabric shutdown", [&] { state.strategy->before_shutdown(); });
    } catch (const std::exception& error) {
      std::fprintf(stderr, "fabric: error while shutting down: %s\n", error.what());
    }
  }
  // Rank 0 first waits for the ranks it started (they may still use the
  // process group and the store it serves); a failed one ends the process.
  if (state.collectives().launched()) detail::finish_launch(unwinding);
  try {
    if (is_global_zero()) {
      for (const auto& logger : state.options.loggers()) logger->finalize();
      if (state.sync_check && !unwinding) {
        const std::string summary = state.sync_check->summary(world_size());
        if (!summary.empty()) detail::write_stderr_line(summary);
      }
    }
    // The monitor first, then the strategy's own state (Reducers, fsdp's
    // units), then its plugins: the process group, the store.
    state.collectives().stop_monitor();
    state.strategy.reset();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "fabric: error while shutting down: %s\n", error.what());
  }
}

void Fabric::launch() {
  sharding_->launch([this] { state_->strategy->launch(); });
}

torch::Device Fabric::device() const { return state_->device(); }
int Fabric::global_rank() const { return state_->placement().global_rank; }
int Fabric::local_rank() const { return state_->placement().local_rank; }
int Fabric::node_rank() const { return state_->placement().node_rank; }
int Fabric::world_size() const { return state_->placement().world_size; }
bool Fabric::is_global_zero() const { return state_->placement().global_rank == 0; }
Fabric::SyncCheckCost Fabric::sync_check_cost() const {
  const auto& check = state_->sync_check;
  if (!check) return {};
  return {check->checks_run(), check->seconds_checking()};
}

const Options& Fabric::options() const { return state_->options; }
detail::Strategy& Fabric::strategy() const { return *state_->strategy; }

namespace {

// Every rank starts from rank 0's values of a newly set-up parameter set
// (and of the buffers given), whatever its seed. Detached aliases: broadcast
// writes into them in place, which autograd would refuse on leaf parameters
// that require grad.
void broadcast_from_rank_zero(detail::FabricState& state, const char* call, const detail::NamedParameters& parameters,
                              const std::vector<at::Tensor>& buffers) {
  const auto& group = state.collectives().group();
  if (!group) return;
  std::vector<at::Tensor> values;
  std::vector<at::Tensor> trained_parameters;
  for (const auto& item : parameters) {
    values.push_back(item.second.detach());
    if (item.second.requires_grad()) trained_parameters.push_back(item.second);
  }
  for (const auto& buffer : buffers) values.push_back(buffer.detach());
  // Gloo broadcasts only float, double, half and the integer types of 8, 32
  // and 64 bits: a bool buffer (a transformer's causal mask) or a bfloat16
  // one travels as a type it has, exactly, and is copied back.
  std::vector<std::pair<at::Tensor, at::Tensor>> stand_ins;
  for (auto& value : values) {
    c10::ScalarType carried = value.scalar_type();
    if (carried == at::kBool)
      carried = at::kByte;
    else if (carried == at::kBFloat16)
      carried = at::kFloat;
    else if (carried == at::kShort)
      carried = at::kInt;
    if (carried == value.scalar_type()) continue;
    at::Tensor carrier = value.to(carried);
    stand_ins.emplace_back(value, carrier);
    value = carrier;
  }
  state.collectives().run(call, [&] {
    // Fails with a clear message when ranks built different models.
    c10d::verify_params_across_processes(group, trained_parameters, c10::nullopt);
    if (!values.empty()) {
      // fsdp: a whole-model bucket would be the run's peak (a model about
      // to be sharded is one that barely fits); the gradient bucket size.
      const size_t cap =
          state.strategy->name() == "fsdp" ? detail::bucket_bytes(state.options).second : detail::kBroadcastBucketBytes;
      c10d::broadcast_coalesced(group, values, cap, 0);
    }
  });
  for (auto& [value, carrier] : stand_ins) value.copy_(carrier);
}

// A model is set up that holds parameters of loose sets (setup_optimizer
// took them when no set-up model owned them): they leave those sets, whose
// synchronization is rebuilt over what is left (as when the parameters that
// require grad change), so that each tensor is synchronized once, with its
// model. Local; every rank does the same.
void release_loose_parameters(detail::FabricState& state, const detail::NamedParameters& parameters) {
  std::unordered_set<const c10::TensorImpl*> taken;
  for (const auto& item : parameters) taken.insert(item.second.unsafeGetTensorImpl());
  for (size_t k = 0; k < state.models.size();) {
    auto& entry = state.models[k];
    if (!entry.loose) {
      ++k;
      continue;
    }
    detail::NamedParameters kept;
    std::vector<char> kept_trained;
    detail::NamedParameters trained;  // as the strategy last saw them
    for (size_t i = 0; i < entry.parameters.size(); ++i) {
      if (taken.count(entry.parameters[i].second.unsafeGetTensorImpl()) > 0) continue;
      kept.push_back(entry.parameters[i]);
      kept_trained.push_back(entry.trained[i]);
      if (entry.trained[i]) trained.push_back(entry.parameters[i]);
    }
    if (kept.size() == entry.parameters.size()) {
      ++k;
      continue;
    }
    state.strategy->trained_parameters_changed(entry.address, trained);
    if (kept.empty()) {
      state.strategy->forget_module(entry.address);
      state.models.erase(state.models.begin() + static_cast<std::ptrdiff_t>(k));
      continue;
    }
    entry.parameters = std::move(kept);
    entry.trained = std::move(kept_trained);
    detail::FabricState::record_places(entry);
    ++k;
  }
}

// Both setup_module overloads; `owner` is null for a model held by value.
void setup_model(detail::FabricState& state, torch::nn::Module& model, std::shared_ptr<torch::nn::Module> owner) {
  torch::nn::Module* const module = &model;
  state.collectives().require_launched("setup()");
  detail::NamedParameters all_parameters;
  for (const auto& item : module->named_parameters()) {
    all_parameters.emplace_back(item.key(), item.value());
  }
  // Parameters that setup_optimizer took when no set-up model owned them
  // (an optimizer over this model and another one, set up with the other
  // one) belong to this model from now on.
  release_loose_parameters(state, all_parameters);
  // A model set up again is recognized by its parameter tensors, not only
  // its address: a model held by value that was destroyed can have a
  // successor at the same address (a train() function called twice), which
  // is a new model and needs its own Reducer.
  bool first_setup = true;
  if (auto* known = state.find_model(module)) {
    bool same = known->parameters.size() == all_parameters.size();
    for (size_t i = 0; same && i < all_parameters.size(); ++i) {
      same = known->parameters[i].second.unsafeGetTensorImpl() == all_parameters[i].second.unsafeGetTensorImpl();
    }
    if (same) {
      first_setup = false;
    } else {
      state.strategy->forget_module(module);
      state.models.erase(state.models.begin() + (known - state.models.data()));
    }
  }
  state.strategy->precision().convert_module(*module);
  if (first_setup) {
    detail::FabricState::SetUpModel entry;
    entry.address = module;
    entry.owner = std::move(owner);
    entry.parameters = all_parameters;  // Module::to keeps the tensors (set_data)
    for (const auto& item : all_parameters) entry.trained.push_back(item.second.requires_grad() ? 1 : 0);
    state.models.push_back(std::move(entry));
  }

  detail::NamedParameters trained;
  for (const auto& item : all_parameters) {
    if (item.second.requires_grad()) trained.push_back(item);
  }
  // A model set up again may be sharded (fsdp): whole while it is broadcast.
  std::function<void()> readable;
  if (!first_setup)
    readable = state.collectives().run("fabric.setup()", [&] { return state.strategy->make_parameters_readable(); });
  struct Undo {
    std::function<void()>& step;
    ~Undo() {
      if (step) step();
    }
  } undo_at_exit{readable};
  broadcast_from_rank_zero(state, "fabric.setup()", all_parameters, module->buffers());
  // A model set up twice keeps what the strategy attached the first time
  // (a second Reducer on the same parameters would wait for gradients that
  // the first one takes).
  if (!first_setup) {
    state.strategy->module_loaded(*module);
    detail::FabricState::record_places(*state.find_model(module));
    return;
  }
  state.collectives().run("fabric.setup()", [&] { state.strategy->setup_module(*module, trained); });
  detail::FabricState::record_places(*state.find_model(module));
}

// An optimizer's parameters that no set-up model owns (a class that is not a
// module holds the modules, and gathers their parameters for the
// optimizer), held by a module of Fabric's own so that they are set up as
// one: Module::to moves and casts them in place (set_data: the optimizer
// keeps referring to the same tensors), the strategies key their state by
// its address, and the Fabric keeps it (and so the tensors) alive.
class LooseParameters : public torch::nn::Module {
 public:
  explicit LooseParameters(const detail::NamedParameters& parameters) : torch::nn::Module("fabric::LooseParameters") {
    for (size_t i = 0; i < parameters.size(); ++i) {
      const at::Tensor& tensor = parameters[i].second;
      register_parameter("p" + std::to_string(i), tensor, tensor.requires_grad());
    }
  }
};

// "16x8"; "scalar" for a 0-dimensional tensor.
std::string shape_of(const at::Tensor& tensor) {
  if (tensor.dim() == 0) return "scalar";
  std::string text;
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    text += (d > 0 ? "x" : "") + std::to_string(tensor.size(d));
  }
  return text;
}

// setup_optimizer's parameters of no set-up model, `loose` (named by their
// place in the optimizer), become a set-up parameter set: on the device and
// in the precision, rank 0's values, and the strategy's synchronization
// over those that require grad, as setup_model gives a model.
void setup_loose_parameters(detail::FabricState& state, detail::NamedParameters loose) {
  // Leaf tensors: LibTorch's optimizers refuse others ("can't optimize a
  // non-leaf Tensor").
  auto holder = std::make_shared<LooseParameters>(loose);
  state.strategy->precision().convert_module(*holder);
  ++state.loose_sets;
  detail::FabricState::SetUpModel entry;
  entry.address = holder.get();
  entry.owner = holder;
  entry.loose = true;
  entry.parameters = loose;  // Module::to kept the tensors (set_data)
  detail::NamedParameters trained;
  int64_t values = 0;
  for (const auto& item : loose) {
    entry.trained.push_back(item.second.requires_grad() ? 1 : 0);
    if (item.second.requires_grad()) trained.push_back(item);
    values += item.second.numel();
  }
  state.models.push_back(std::move(entry));
  broadcast_from_rank_zero(state, "fabric.setup_optimizer()", loose, {});
  state.collectives().run("fabric.setup_optimizer()", [&] { state.strategy->setup_module(*holder, trained); });
  detail::FabricState::record_places(*state.find_model(holder.get()));

  // What Fabric cannot do without the modules: their buffers.
  if (state.placement().world_size == 1 || state.noted_loose_parameters) return;
  state.noted_loose_parameters = true;
  if (state.placement().global_rank != 0) return;
  detail::write_stderr_line("fabric: note: fabric.setup_optimizer(): " + std::to_string(loose.size()) +
                            " parameter tensor" + (loose.size() == 1 ? "" : "s") + " (" + std::to_string(values) +
                            " values) of this optimizer belong to no model passed to fabric.setup(); Fabric "
                            "synchronizes them as a set of their own under strategy '" +
                            state.strategy->name() +
                            "' (rank 0's values broadcast now, gradients averaged across ranks in every "
                            "fabric.backward() that reaches them). The modules that hold them are not visible to "
                            "Fabric, so their buffers (BatchNorm running statistics, other registered buffers) are "
                            "not broadcast from rank 0: build them alike on every rank (the same seed), or pass such "
                            "a module to fabric.setup(module, optimizer). (Printed once, by rank 0.)");
}

}  // namespace

void Fabric::setup_module(const std::shared_ptr<torch::nn::Module>& module) {
  TORCH_CHECK(module != nullptr, "fabric::setup: the model is empty");
  setup_model(*state_, *module, module);
}

void Fabric::setup_module(torch::nn::Module& module) { setup_model(*state_, module, nullptr); }

void Fabric::setup_optimizer(torch::optim::Optimizer& optimizer) {
  auto& state = *state_;
  state.collectives().require_launched("setup()");
  // An optimizer the strategy cannot run is refused before anything changes.
  state.strategy->setup_optimizer(optimizer);
  // The parameters of a set-up model were moved, cast and broadcast with it
  // (Module::to keeps the tensors, so the optimizer's references stay
  // valid). The others (the optimizer of a class that holds its modules
  // itself, or an extra tensor beside a set-up model) become a set of their
  // own; ones set up before by another optimizer keep their set.
  std::unordered_set<const c10::TensorImpl*> set_up;
  for (const auto& model : state.models) {
    for (const auto& item : model.parameters) set_up.insert(item.second.unsafeGetTensorImpl());
  }
  detail::NamedParameters loose;
  const auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& parameters = groups[g].params();
    for (size_t i = 0; i < parameters.size(); ++i) {
      const at::Tensor& parameter = parameters[i];
      // Also a tensor listed twice (in two groups) is taken once.
      if (!parameter.defined() || !set_up.insert(parameter.unsafeGetTensorImpl()).second) continue;
      loose.emplace_back("param_groups[" + std::to_string(g) + "][" + std::to_string(i) + "] (" + shape_of(parameter) +
                             ") of setup_optimizer #" + std::to_string(state.loose_sets + 1),
                         parameter);
    }
  }
  if (!loose.empty()) setup_loose_parameters(state, std::move(loose));
  for (const auto& group : groups) {
    for (const auto& parameter : group.params()) {
      TORCH_CHECK(!parameter.defined() || parameter.device() == state.device(),
                  "fabric::setup: an optimizer parameter is on ", parameter.device(), " instead of ", state.device(),
                  " (it was moved after it was set up); move it back, or load values with "
                  "fabric.load()");
    }
  }
}

namespace {

// What every rank contributes to the agreement on a changed set of trained
// parameters: a tag (a rank in another collective sends other data), the
// set's hash, and its size in tensors and in values.
constexpr int64_t kTrainedSetTag = 0x4661627269635472;  // "FabricTr"

// Several processes, and this rank found the set of parameters that require
// grad changed: every rank must have found the same change at this same
// backward, since the Reducers are rebuilt over it on every rank. One small
// all-gather, only at such a backward; every rank that joins it throws the
// same error when the sets differ, before anything is computed or sent.
void agree_on_trained_parameters(detail::FabricState& state, const std::vector<std::vector<size_t>>& replaced,
                                 const char* call) {
  uint64_t hash = detail::kFnvOffset;
  int64_t tensors = 0;
  int64_t values = 0;
  size_t replaced_count = 0;
  for (size_t k = 0; k < replaced.size(); ++k) {
    for (const size_t i : replaced[k]) {
      detail::fnv_mix(hash, -1 - static_cast<int64_t>(k));
      detail::fnv_mix(hash, static_cast<int64_t>(i));
      // Their values: the forward already used them, so they cannot be
      // overwritten with rank 0's now; every rank must have loaded the same.
      detail::fnv_mix(hash, detail::hash_of(state.models[k].parameters[i].second));
      ++replaced_count;
    }
  }
  for (size_t k = 0; k < state.models.size(); ++k) {
    const auto& parameters = state.models[k].parameters;
    for (size_t i = 0; i < parameters.size(); ++i) {
      const auto& parameter = parameters[i].second;
      if (!parameter.requires_grad()) continue;
      detail::fnv_mix(hash, static_cast<int64_t>(k));
      detail::fnv_mix(hash, static_cast<int64_t>(i));
      for (const int64_t size : parameter.sizes()) detail::fnv_mix(hash, size);
      ++tensors;
      values += parameter.numel();
    }
  }
  const int world = state.placement().world_size;
  const std::vector<int64_t> fields{kTrainedSetTag, static_cast<int64_t>(hash), tensors, values,
                                    static_cast<int64_t>(replaced_count)};
  std::vector<std::vector<int64_t>> all;
  state.collectives().run(
      call, [&] { all = detail::all_gather_fields(state.collectives().group(), state.device(), world, fields); });
  std::string absent;
  bool agree = true;
  for (int r = 0; r < world; ++r) {
    const auto& other = all[static_cast<size_t>(r)];
    if (other[0] != kTrainedSetTag) {
      absent += (absent.empty() ? "" : ", ") + std::to_string(r);
    } else if (other[1] != fields[1] || other[2] != tensors || other[3] != values || other[4] != fields[4]) {
      agree = false;
    }
  }
  const std::string rule =
      " Fabric rebuilds the gradient synchronization (the DDP Reducer, the sharded strategies' "
      "owners and buckets) over the parameters that require grad when that set changes, and "
      "every rank must do so at the same fabric.backward(): freeze and unfreeze "
      "(requires_grad_) the same parameters at the same step on every rank (a condition that "
      "differs per rank, such as its own loss or data, must be all-reduced first).";
  const std::string replaced_rule =
      " Fabric follows a parameter that gets new storage after fabric.setup() (torch::load, Module::load, set_, "
      "set_data or ->to() on a set-up model: the gradient synchronization is rebuilt over it) when every rank "
      "replaces the same parameters with the same values before the same fabric.backward(): load the same "
      "checkpoint on every rank, at the same point (fabric.load(path, state) does, in place), never under "
      "is_global_zero() alone.";
  const bool involves_replaced = std::any_of(all.begin(), all.end(), [](const auto& other) { return other[4] != 0; });
  if (!absent.empty()) {
    const std::string what = replaced_count > 0 ? std::to_string(replaced_count) +
                                                      " parameter tensors of the set-up models got new storage "
                                                      "since the previous backward"
                                                : "the set of parameters that require grad changed since the "
                                                  "previous backward";
    throw std::runtime_error("fabric.backward(): on rank " + std::to_string(state.placement().global_rank) + " " +
                             what + ", but rank" + (absent.find(',') != std::string::npos ? "s " : " ") + absent +
                             " did not at this backward (they are in another collective)." +
                             (replaced_count > 0 ? replaced_rule : rule));
  }
  if (agree) return;
  std::string ranks;
  for (int r = 0; r < world; ++r) {
    const auto& other = all[static_cast<size_t>(r)];
    ranks += (r == 0 ? "rank " : "; rank ") + std::to_string(r) + " trains " + std::to_string(other[2]) +
             " parameter tensor" + (other[2] == 1 ? "" : "s") + " (" + std::to_string(other[3]) + " values)";
    if (involves_replaced) ranks += " and replaced " + std::to_string(other[4]);
  }
  throw std::runtime_error(
      std::string("fabric.backward(): the ranks disagree on which parameters of the set-up models ") +
      (involves_replaced ? "got new storage since the previous backward or " : "") + "require grad: " + ranks +
      (std::all_of(
           all.begin(), all.end(),
           [&](const auto& other) { return other[2] == tensors && other[3] == values && other[4] == fields[4]; })
           ? (involves_replaced ? " (as many on every rank, but not the same ones, or not the same values)"
                                : " (as many on every rank, but not the same ones)")
           : "") +
      "." + (involves_replaced ? replaced_rule : rule) + " Nothing was computed or sent for this backward.");
}

// Makes the strategy follow the set-up models' parameters: a model whose
// set of parameters that require grad changed since the strategy last saw it
// (LoRA: the adapters first, then every parameter), or one whose parameters
// were replaced after setup (torch::load, Module::load, set_, set_data,
// Module::to: new storage, dtype or device), gets its gradient
// synchronization rebuilt. Every rank must find the same at the same
// backward, replaced parameters holding the same values (checked: the
// forward has used them, so rank 0's can no longer be broadcast).
// `agree_anyway`: the ranks meet in the agreement even when this one found
// nothing (the sync check is due at this backward on every rank): a rank
// that replaced parameters alone is then named as such, not found later in
// another collective.
void follow_trained_parameters(detail::FabricState& state, bool agree_anyway) {
  std::vector<size_t> changed;
  // Per model: the positions of the parameters replaced since last seen.
  std::vector<std::vector<size_t>> replaced(state.models.size());
  const bool follows_places = state.strategy->follows_replaced_parameters();
  bool any_replaced = false;
  for (size_t k = 0; k < state.models.size(); ++k) {
    const auto& model = state.models[k];
    bool model_changed = false;
    for (size_t i = 0; i < model.parameters.size(); ++i) {
      const auto& parameter = model.parameters[i].second;
      if ((parameter.requires_grad() ? 1 : 0) != model.trained[i]) model_changed = true;
      if (follows_places && i < model.places.size() && !model.places[i].holds(parameter)) {
        replaced[k].push_back(i);
        model_changed = true;
        any_replaced = true;
      }
    }
    if (model_changed) changed.push_back(k);
  }
  if (changed.empty() && !agree_anyway) return;
  if (state.collectives().group()) {
    agree_on_trained_parameters(state, replaced,
                                changed.empty() ? "fabric.backward() (sync check)" : detail::kTrainedSetChangedCall);
  }
  if (changed.empty()) return;
  for (const size_t k : changed) {
    auto& model = state.models[k];
    detail::NamedParameters trained;
    for (size_t i = 0; i < model.parameters.size(); ++i) {
      const bool requires_grad = model.parameters[i].second.requires_grad();
      model.trained[i] = requires_grad ? 1 : 0;
      if (requires_grad) trained.push_back(model.parameters[i]);
    }
    // Local on every rank (a Reducer is built without communicating).
    if (replaced[k].empty()) {
      state.strategy->trained_parameters_changed(model.address, trained);
    } else {
      state.strategy->parameters_replaced(model.address, trained);
    }
    detail::FabricState::record_places(model);
  }
  if (!any_replaced || state.placement().world_size == 1 || state.noted_replaced_parameters) return;
  state.noted_replaced_parameters = true;
  if (state.placement().global_rank != 0) return;
  size_t count = 0;
  std::string first;
  for (size_t k = 0; k < state.models.size(); ++k) {
    for (const size_t i : replaced[k]) {
      if (count++ == 0) first = state.models[k].parameters[i].first;
    }
  }
  detail::write_stderr_line(
      "fabric: note: fabric.backward(): " + std::to_string(count) + " parameter tensor" + (count == 1 ? "" : "s") +
      " of the set-up models (first '" + first +
      "') got new storage after fabric.setup() (torch::load, Module::load, set_, set_data or ->to() replace a "
      "parameter's tensor data; copy_ does not). Fabric rebuilt their gradient synchronization under strategy '" +
      state.strategy->name() +
      "' and checked that every rank holds the same values. fabric.load(path, state) loads in place. (Printed "
      "once, by rank 0.)");
}

}  // namespace

detail::BackwardPassCounter Fabric::backward_pass_counter() const { return state_->backward_passes; }

uint64_t Fabric::gradient_synchronizations() const { return state_->gradient_synchronizations; }

void Fabric::backward(const torch::Tensor& loss, const torch::Tensor& gradient, c10::optional<bool> retain_graph,
                      bool create_graph) {
  auto& state = *state_;
  const bool check_sync = state.sync_check && state.collectives().group() && state.sync_check->due_before_backward();
  follow_trained_parameters(state, check_sync);
  state.strategy->check_in_sync("fabric.backward()");
  if (check_sync) check_sync_sampled(/*at_end=*/false);
  verify::record_loss(loss);
  std::vector<detail::SetUpModelInBackward> models;
  models.reserve(state.models.size());
  for (const auto& model : state.models) models.push_back({model.address, &model.parameters, model.no_sync_depth == 0});
  state.strategy->backward(loss, models, {gradient, retain_graph, create_graph}, [&](bool synchronized) {
    if (auto* monitor = state.collectives().monitor()) monitor->count_backward();
    state.backward_passes->fetch_add(1);
    if (synchronized && state.placement().world_size > 1)
      watch_for_duplicate_data(loss, ++state.gradient_synchronizations);
  });
}

namespace {

// Several ranks, and an optimizer none of whose parameters belongs to a
// set-up model: its gradients were never all-reduced. Checked once per
// optimizer until the first warning.
void warn_if_optimizer_not_set_up(detail::FabricState& state, const torch::optim::Optimizer& optimizer) {
  if (state.placement().world_size == 1 || state.warned_step_without_setup ||
      state.optimizers_known_set_up.count(&optimizer) > 0) {
    return;
  }
  std::unordered_set<const void*> set_up;
  for (const auto& model : state.models) {
    for (const auto& item : model.parameters) set_up.insert(item.second.unsafeGetTensorImpl());
  }
  bool any_parameter = false;
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& parameter : group.params()) {
      any_parameter = true;
      if (set_up.count(parameter.unsafeGetTensorImpl()) > 0) {
        state.optimizers_known_set_up.insert(&optimizer);
        return;
      }
    }
  }
  if (!any_parameter) return;
  state.warned_step_without_setup = true;
  if (state.placement().global_rank != 0) return;
  detail::write_stderr_line("fabric: warning: fabric.step() runs on " + std::to_string(state.placement().world_size) +
                            " processes, but none of the optimizer's parameters belongs to a model passed to "
                            "fabric.setup(), so its gradients are not synchronized: every rank trains its own copy "
                            "of the model on its own data. Call fabric.setup(model, optimizer) once the optimizer "
                            "exists, before training. (Printed once, by rank 0.)");
}

}  // namespace

void Fabric::step(torch::optim::Optimizer& optimizer) { step(optimizer, nullptr); }

torch::Tensor Fabric::step(torch::optim::Optimizer& optimizer, torch::optim::Optimizer::LossClosure closure) {
  auto& state = *state_;
  state.collectives().require_launched("step()");
  warn_if_optimizer_not_set_up(state, optimizer);
  auto loss = state.collectives().run("fabric.step()", [&] { return state.strategy->step(optimizer, closure); });
  if (auto* monitor = state.collectives().monitor()) monitor->count_step();
  // Before the sync check, which ends the job when the ranks differ: the
  // record then shows the step where they did.
  verify::record_step(optimizer);
  if (state.sync_check && state.sync_check->mode() == detail::SyncCheckMode::every_step)
    check_sync_after_step(optimizer);
  return loss;
}

namespace {

// The set-up models' parameters for the sync check (kept at setup: a model
// held by value may be gone), each tensor once (`listed`), named in their
// model (and by its number when there are several).
std::vector<detail::SyncCheck::Parameter> set_up_parameters_to_check(const detail::FabricState& state,
                                                                     std::unordered_set<const void*>& listed) {
  std::vector<detail::SyncCheck::Parameter> parameters;
  for (size_t k = 0; k < state.models.size(); ++k) {
    for (const auto& [name, tensor] : state.models[k].parameters) {
      if (!listed.insert(tensor.unsafeGetTensorImpl()).second) continue;
      parameters.push_back({state.models.size() > 1 && !state.models[k].loose
                                ? name + " (set-up model #" + std::to_string(k + 1) + ")"
                                : name,
                            tensor});
    }
  }
  return parameters;
}

}  // namespace

void Fabric::check_sync_after_step(torch::optim::Optimizer& optimizer) {
  auto& state = *state_;
  // The set-up models' parameters, then the optimizer's others, each once.
  std::unordered_set<const void*> listed;
  std::vector<detail::SyncCheck::Parameter> parameters = set_up_parameters_to_check(state, listed);
  const auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& group_parameters = groups[g].params();
    for (size_t i = 0; i < group_parameters.size(); ++i) {
      if (!listed.insert(group_parameters[i].unsafeGetTensorImpl()).second) continue;
      parameters.push_back({"parameter " + std::to_string(i) + " of the optimizer's param group " + std::to_string(g) +
                                " (no set-up model holds it)",
                            group_parameters[i]});
    }
  }
  auto scope = state.collectives().scope("fabric.step() (FABRIC_CHECK_SYNC)");
  detail::SyncCheck::AllGather gather;
  if (state.collectives().group()) gather = [this](const at::Tensor& tensor) { return all_gather(tensor); };
  const auto start = std::chrono::steady_clock::now();
  const std::string failure = state.sync_check->after_step(parameters, world_size(), gather);
  state.sync_check->record_cost(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (!failure.empty()) stop_for_sync_check(failure);
}

void Fabric::check_sync_sampled(bool at_end) {
  auto& state = *state_;
  const auto start = std::chrono::steady_clock::now();
  std::unordered_set<const void*> listed;
  const std::vector<detail::SyncCheck::Parameter> parameters = set_up_parameters_to_check(state, listed);
  const char* call = at_end ? "fabric shutdown (sync check)" : "fabric.backward() (sync check)";
  auto scope = state.collectives().scope(call);
  // fsdp: whole while they are hashed.
  auto readable = state.collectives().run(call, [&] { return state.strategy->make_parameters_readable(); });
  std::string failure;
  {
    struct Undo {
      std::function<void()>& step;
      ~Undo() {
        if (step) step();
      }
    } undo_at_exit{readable};
    failure = state.sync_check->check_sampled(
        parameters, [this](const at::Tensor& tensor) { return all_gather(tensor); }, at_end);
  }
  state.sync_check->record_cost(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (!failure.empty()) stop_for_sync_check(failure);
}

void Fabric::stop_for_sync_check(const std::string& failure) {
  // Every rank found the same: rank 0 says it once and every rank exits 1.
  detail::stop_reporting_child_exits();
  if (is_global_zero()) detail::write_stderr_line(failure);
  if (!is_global_zero() && state_->placement().launcher == "fabric") {
    // Stopped by the launcher once rank 0 has spoken; exits itself otherwise.
    std::this_thread::sleep_for(std::chrono::seconds(10));
  }
  detail::abort_job("the sync check failed (see rank 0's message)", 1);
}

std::ostream& Fabric::print() {
  static std::ostream discard(nullptr);  // no buffer: every write is dropped
  return is_global_zero() ? std::cout : discard;
}

int Fabric::printf(const char* format, ...) {
  if (!is_global_zero()) return 0;
  va_list arguments;
  va_start(arguments, format);
  const int result = std::vprintf(format, arguments);
  va_end(arguments);
  std::fflush(stdout);
  return result;
}

void Fabric::write_to_stdout(const std::string& text) { std::cout << text; }

// ---- collectives, through the strategy's collectives plugin ------------------

torch::Tensor Fabric::all_reduce(const torch::Tensor& tensor, ReduceOp op) {
  return strategy().collectives().all_reduce(tensor, op);
}

double Fabric::all_reduce_double(double value, ReduceOp op) {
  return all_reduce(torch::tensor(value, torch::kDouble), op).cpu().item<double>();
}

int64_t Fabric::all_reduce_integer(int64_t value, ReduceOp op) {
  return all_reduce(torch::tensor(value, torch::kLong), op).cpu().item<int64_t>();
}

void Fabric::check_integer_reduction(ReduceOp op, const char* what) {
  if (op != ReduceOp::Mean) return;
  throw std::invalid_argument(std::string("fabric::all_reduce: ReduceOp::Mean of ") + what +
                              " would not be one: pass a double (or float) to average, or reduce with "
                              "ReduceOp::Sum and divide by the total count yourself");
}

void Fabric::throw_integer_overflow(const char* why) {
  throw std::overflow_error(std::string("fabric::all_reduce: integers are reduced as int64_t; ") + why +
                            ". Reduce a double instead");
}

std::vector<torch::Tensor> Fabric::all_gather(const torch::Tensor& tensor) {
  return strategy().collectives().all_gather(tensor);
}

torch::Tensor Fabric::broadcast(const torch::Tensor& tensor, int src) {
  return strategy().collectives().broadcast(tensor, src);
}

std::string Fabric::broadcast(const std::string& value, int src) {
  return strategy().collectives().broadcast(value, src);
}

void Fabric::barrier(const std::string& name) { strategy().collectives().barrier(name); }

// ---- precision, through the strategy's precision plugin ---------------------

double Fabric::loss_scale() const { return strategy().precision().loss_scale(); }

Autocast Fabric::autocast() {
  const detail::Precision& precision = strategy().precision();
  return Autocast(precision.autocasts(), device().type(), precision.autocast_dtype());
}

torch::Tensor Fabric::clip_module_gradients(torch::nn::Module& module, torch::optim::Optimizer& /*optimizer*/,
                                            c10::optional<double> clip_val, c10::optional<double> max_norm,
                                            double norm_type, bool error_if_nonfinite) {
  return strategy().clip_gradients(module, clip_val, max_norm, norm_type, error_if_nonfinite);
}

// ---- loggers ---------------------------------------------------------------------

std::ofstream rank_zero_ofstream(const std::string& path, std::ios::openmode mode) {
  return detail::open_rank_zero_ofstream(detail::global_zero_from_environment(), path, mode);
}

FILE* detail::open_rank_zero_popen(bool global_zero, const char* command, const char* mode) {
  const bool writes = mode != nullptr && std::strchr(mode, 'w') != nullptr;
  // `cat` takes what the program writes and drops it; pclose waits for it
  // as it would for the real command.
  return ::popen(global_zero || !writes ? command : "cat > /dev/null", mode);
}

FILE* Fabric::rank_zero_popen(const char* command, const char* mode) const {
  return detail::open_rank_zero_popen(is_global_zero(), command, mode);
}

FILE* rank_zero_popen(const char* command, const char* mode) {
  return detail::open_rank_zero_popen(detail::global_zero_from_environment(), command, mode);
}

void Fabric::log(const std::string& name, double value, int64_t step) { log_dict(Metrics{{name, value}}, step); }

void Fabric::log_dict(const Metrics& metrics, int64_t step) {
  const int64_t call = state_->log_calls++;
  if (!is_global_zero()) return;
  for (const auto& logger : state_->options.loggers()) {
    logger->log_metrics(metrics, step < 0 ? call : step);
  }
}

const std::vector<std::shared_ptr<Logger>>& Fabric::loggers() const { return state_->options.loggers(); }

// ---- gradient accumulation, rank_zero_first ---------------------------------------

detail::FabricState* Fabric::checked_state_for_no_sync(const torch::nn::Module* module) {
  if (state_->find_model(module) == nullptr) {
    throw std::logic_error(
        "fabric::no_backward_sync: the model was not set up; call fabric.setup(model, ...) "
        "first");
  }
  return state_.get();
}

NoBackwardSync::NoBackwardSync(detail::FabricState* state, const torch::nn::Module* module, bool enabled)
    : state_(state), module_(module), enabled_(enabled) {
  if (enabled_) ++state_->find_model(module_)->no_sync_depth;
}

NoBackwardSync::~NoBackwardSync() {
  // The model's entry is gone only if another model was set up at its
  // address while the guard lived.
  if (!enabled_) return;
  if (auto* model = state_->find_model(module_)) --model->no_sync_depth;
}

RankZeroFirst Fabric::rank_zero_first(bool local) {
  return RankZeroFirst(*this, local ? local_rank() == 0 : is_global_zero());
}

RankZeroFirst::RankZeroFirst(Fabric& fabric, bool first)
    : fabric_(fabric), first_(first), uncaught_exceptions_(std::uncaught_exceptions()) {
  // The others wait here until the first ones leave their scope.
  if (!first_) fabric_.barrier("fabric.rank_zero_first");
}

RankZeroFirst::~RankZeroFirst() noexcept(false) {
  // A first rank that leaves by an exception does not release the others;
  // the launcher stops the job when that exception ends the process.
  if (first_ && std::uncaught_exceptions() == uncaught_exceptions_) {
    fabric_.barrier("fabric.rank_zero_first");
  }
}

}  // namespace fabric
