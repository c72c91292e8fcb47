// The set-up models (set_up_models.h).
#include "set_up_models.h"

#include "job_monitor/job_monitor.h"
#include "strategies/ddp.h"
#include "utilities/agreement.h"
#include "utilities/messages.h"
#include "utilities/sync_check.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <utility>

namespace fabric {
namespace detail {

namespace {

// PyTorch DDP's default.
constexpr size_t kBroadcastBucketBytes = 250 * 1024 * 1024;

// What every rank contributes to the agreement on a changed set of trained
// parameters: a tag (a rank in another collective sends other data), the
// set's hash, and its size in tensors and in values.
constexpr int64_t kTrainedSetTag = 0x4661627269635472;  // "FabricTr"

// An optimizer's parameters that no set-up model owns (a class that is not a
// module holds the modules, and gathers their parameters for the
// optimizer), held by a module of Fabric's own so that they are set up as
// one: Module::to moves and casts them in place (set_data: the optimizer
// keeps referring to the same tensors), the strategies key their state by
// its address, and the Fabric keeps it (and so the tensors) alive.
class LooseParameters : public torch::nn::Module {
 public:
  explicit LooseParameters(const NamedParameters& parameters) : torch::nn::Module("fabric::LooseParameters") {
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

}  // namespace

void SetUpModel::record_places() {
  places.clear();
  for (const auto& item : parameters) places.push_back(ParameterPlace::of(item.second));
}

SetUpModel* SetUpModels::find(const torch::nn::Module* address) {
  for (auto& model : models_) {
    if (model.address == address) return &model;
  }
  return nullptr;
}

std::vector<SyncCheck::Parameter> SetUpModels::parameters_to_check(const torch::optim::Optimizer* optimizer) const {
  std::unordered_set<const void*> listed;
  std::vector<SyncCheck::Parameter> parameters;
  for (size_t k = 0; k < models_.size(); ++k) {
    for (const auto& [name, tensor] : models_[k].parameters) {
      if (!listed.insert(tensor.unsafeGetTensorImpl()).second) continue;
      parameters.push_back(
          {models_.size() > 1 && !models_[k].loose ? name + " (set-up model #" + std::to_string(k + 1) + ")" : name,
           tensor});
    }
  }
  if (optimizer == nullptr) return parameters;
  const auto& groups = optimizer->param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& group_parameters = groups[g].params();
    for (size_t i = 0; i < group_parameters.size(); ++i) {
      if (!listed.insert(group_parameters[i].unsafeGetTensorImpl()).second) continue;
      parameters.push_back({"parameter " + std::to_string(i) + " of the optimizer's param group " + std::to_string(g) +
                                " (no set-up model holds it)",
                            group_parameters[i]});
    }
  }
  return parameters;
}

std::unordered_set<const c10::TensorImpl*> SetUpModels::tensors() const {
  std::unordered_set<const c10::TensorImpl*> set_up;
  for (const auto& model : models_) {
    for (const auto& item : model.parameters) set_up.insert(item.second.unsafeGetTensorImpl());
  }
  return set_up;
}

void SetUpModels::warn_if_not_set_up(const torch::optim::Optimizer& optimizer) {
  const ProcessPlacement& placement = strategy_.collectives().placement();
  if (placement.world_size == 1 || warned_step_without_setup_ || optimizers_known_set_up_.count(&optimizer) > 0) return;
  bool any_parameter = false;
  const std::unordered_set<const c10::TensorImpl*> set_up = tensors();
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& parameter : group.params()) {
      any_parameter = true;
      if (set_up.count(parameter.unsafeGetTensorImpl()) > 0) {
        optimizers_known_set_up_.insert(&optimizer);
        return;
      }
    }
  }
  if (!any_parameter) return;
  warned_step_without_setup_ = true;
  if (placement.global_rank != 0) return;
  write_stderr_line("fabric: warning: fabric.step() runs on " + std::to_string(placement.world_size) +
                    " processes, but none of the optimizer's parameters belongs to a model passed to "
                    "fabric.setup(), so its gradients are not synchronized: every rank trains its own copy "
                    "of the model on its own data. Call fabric.setup(model, optimizer) once the optimizer "
                    "exists, before training. (Printed once, by rank 0.)");
}

std::vector<SetUpModelInBackward> SetUpModels::in_backward() const {
  std::vector<SetUpModelInBackward> models;
  models.reserve(models_.size());
  for (const auto& model : models_) models.push_back({model.address, &model.parameters, model.no_sync_depth == 0});
  return models;
}

// Every rank starts from rank 0's values of a newly set-up parameter set
// (and of the buffers given), whatever its seed. Detached aliases: broadcast
// writes into them in place, which autograd would refuse on leaf parameters
// that require grad.
void SetUpModels::broadcast_from_rank_zero(const char* call, const NamedParameters& parameters,
                                           const std::vector<at::Tensor>& buffers) {
  const auto& group = strategy_.collectives().group();
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
  strategy_.collectives().run(call, [&] {
    // Fails with a clear message when ranks built different models.
    c10d::verify_params_across_processes(group, trained_parameters, c10::nullopt);
    if (!values.empty()) {
      // fsdp: a whole-model bucket would be the run's peak (a model about
      // to be sharded is one that barely fits); the gradient bucket size.
      const size_t cap = strategy_.name() == "fsdp" ? bucket_bytes(strategy_.options()).second : kBroadcastBucketBytes;
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
void SetUpModels::release_loose_parameters(const NamedParameters& parameters) {
  std::unordered_set<const c10::TensorImpl*> taken;
  for (const auto& item : parameters) taken.insert(item.second.unsafeGetTensorImpl());
  for (size_t k = 0; k < models_.size();) {
    auto& entry = models_[k];
    if (!entry.loose) {
      ++k;
      continue;
    }
    NamedParameters kept;
    std::vector<char> kept_trained;
    NamedParameters trained;  // as the strategy last saw them
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
    strategy_.trained_parameters_changed(entry.address, trained);
    if (kept.empty()) {
      strategy_.forget_module(entry.address);
      models_.erase(models_.begin() + static_cast<std::ptrdiff_t>(k));
      continue;
    }
    entry.parameters = std::move(kept);
    entry.trained = std::move(kept_trained);
    entry.record_places();
    ++k;
  }
}

void SetUpModels::setup(torch::nn::Module& model, std::shared_ptr<torch::nn::Module> owner) {
  torch::nn::Module* const module = &model;
  strategy_.collectives().require_launched("setup()");
  NamedParameters all_parameters;
  for (const auto& item : module->named_parameters()) {
    all_parameters.emplace_back(item.key(), item.value());
  }
  // Parameters that setup_optimizer took when no set-up model owned them
  // (an optimizer over this model and another one, set up with the other
  // one) belong to this model from now on.
  release_loose_parameters(all_parameters);
  // A model set up again is recognized by its parameter tensors, not only
  // its address: a model held by value that was destroyed can have a
  // successor at the same address (a train() function called twice), which
  // is a new model and needs its own Reducer.
  bool first_setup = true;
  if (auto* known = find(module)) {
    bool same = known->parameters.size() == all_parameters.size();
    for (size_t i = 0; same && i < all_parameters.size(); ++i) {
      same = known->parameters[i].second.unsafeGetTensorImpl() == all_parameters[i].second.unsafeGetTensorImpl();
    }
    if (same) {
      first_setup = false;
    } else {
      strategy_.forget_module(module);
      models_.erase(models_.begin() + (known - models_.data()));
    }
  }
  strategy_.precision().convert_module(*module);
  if (first_setup) {
    SetUpModel entry;
    entry.address = module;
    entry.owner = std::move(owner);
    entry.parameters = all_parameters;  // Module::to keeps the tensors (set_data)
    for (const auto& item : all_parameters) entry.trained.push_back(item.second.requires_grad() ? 1 : 0);
    models_.push_back(std::move(entry));
  }

  NamedParameters trained;
  for (const auto& item : all_parameters) {
    if (item.second.requires_grad()) trained.push_back(item);
  }
  // A model set up again may be sharded (fsdp): whole while it is broadcast.
  std::function<void()> readable;
  if (!first_setup)
    readable = strategy_.collectives().run("fabric.setup()", [&] { return strategy_.make_parameters_readable(); });
  struct Undo {
    std::function<void()>& step;
    ~Undo() {
      if (step) step();
    }
  } undo_at_exit{readable};
  broadcast_from_rank_zero("fabric.setup()", all_parameters, module->buffers());
  // A model set up twice keeps what the strategy attached the first time
  // (a second Reducer on the same parameters would wait for gradients that
  // the first one takes).
  if (!first_setup) {
    strategy_.module_loaded(*module);
    find(module)->record_places();
    return;
  }
  strategy_.collectives().run("fabric.setup()", [&] { strategy_.setup_module(*module, trained); });
  find(module)->record_places();
}

// setup_optimizer's parameters of no set-up model, `loose` (named by their
// place in the optimizer), become a set-up parameter set: on the device and
// in the precision, rank 0's values, and the strategy's synchronization
// over those that require grad, as SetUpModels::setup gives a model.
void SetUpModels::setup_loose_parameters(NamedParameters loose) {
  // Leaf tensors: LibTorch's optimizers refuse others ("can't optimize a
  // non-leaf Tensor").
  auto holder = std::make_shared<LooseParameters>(loose);
  strategy_.precision().convert_module(*holder);
  ++loose_sets_;
  SetUpModel entry;
  entry.address = holder.get();
  entry.owner = holder;
  entry.loose = true;
  entry.parameters = loose;  // Module::to kept the tensors (set_data)
  NamedParameters trained;
  int64_t values = 0;
  for (const auto& item : loose) {
    entry.trained.push_back(item.second.requires_grad() ? 1 : 0);
    if (item.second.requires_grad()) trained.push_back(item);
    values += item.second.numel();
  }
  models_.push_back(std::move(entry));
  broadcast_from_rank_zero("fabric.setup_optimizer()", loose, {});
  strategy_.collectives().run("fabric.setup_optimizer()", [&] { strategy_.setup_module(*holder, trained); });
  find(holder.get())->record_places();

  // What Fabric cannot do without the modules: their buffers.
  if (strategy_.collectives().placement().world_size == 1 || noted_loose_parameters_) return;
  noted_loose_parameters_ = true;
  if (strategy_.collectives().placement().global_rank != 0) return;
  write_stderr_line("fabric: note: fabric.setup_optimizer(): " + std::to_string(loose.size()) + " parameter tensor" +
                    (loose.size() == 1 ? "" : "s") + " (" + std::to_string(values) +
                    " values) of this optimizer belong to no model passed to fabric.setup(); Fabric "
                    "synchronizes them as a set of their own under strategy '" +
                    strategy_.name() +
                    "' (rank 0's values broadcast now, gradients averaged across ranks in every "
                    "fabric.backward() that reaches them). The modules that hold them are not visible to "
                    "Fabric, so their buffers (BatchNorm running statistics, other registered buffers) are "
                    "not broadcast from rank 0: build them alike on every rank (the same seed), or pass such "
                    "a module to fabric.setup(module, optimizer). (Printed once, by rank 0.)");
}

void SetUpModels::setup_optimizer_parameters(const torch::optim::Optimizer& optimizer) {
  // The parameters of a set-up model were moved, cast and broadcast with it
  // (Module::to keeps the tensors, so the optimizer's references stay
  // valid). The others (the optimizer of a class that holds its modules
  // itself, or an extra tensor beside a set-up model) become a set of their
  // own.
  std::unordered_set<const c10::TensorImpl*> set_up = tensors();
  NamedParameters loose;
  const auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& parameters = groups[g].params();
    for (size_t i = 0; i < parameters.size(); ++i) {
      const at::Tensor& parameter = parameters[i];
      // Also a tensor listed twice (in two groups) is taken once.
      if (!parameter.defined() || !set_up.insert(parameter.unsafeGetTensorImpl()).second) continue;
      loose.emplace_back("param_groups[" + std::to_string(g) + "][" + std::to_string(i) + "] (" + shape_of(parameter) +
                             ") of setup_optimizer #" + std::to_string(loose_sets_ + 1),
                         parameter);
    }
  }
  if (!loose.empty()) setup_loose_parameters(std::move(loose));
}

// Several processes, and this rank found the set of parameters that require
// grad changed: every rank must have found the same change at this same
// backward, since the Reducers are rebuilt over it on every rank. One small
// all-gather, only at such a backward; every rank that joins it throws the
// same error when the sets differ, before anything is computed or sent.
std::vector<int64_t> SetUpModels::trained_set_fields(const std::vector<std::vector<size_t>>& replaced) const {
  uint64_t hash = kFnvOffset;
  int64_t tensors = 0;
  int64_t values = 0;
  size_t replaced_count = 0;
  for (size_t k = 0; k < replaced.size(); ++k) {
    for (const size_t i : replaced[k]) {
      fnv_mix(hash, -1 - static_cast<int64_t>(k));
      fnv_mix(hash, static_cast<int64_t>(i));
      // Their values: the forward already used them, so they cannot be
      // overwritten with rank 0's now; every rank must have loaded the same.
      fnv_mix(hash, hash_of(models_[k].parameters[i].second));
      ++replaced_count;
    }
  }
  for (size_t k = 0; k < models_.size(); ++k) {
    const auto& parameters = models_[k].parameters;
    for (size_t i = 0; i < parameters.size(); ++i) {
      const auto& parameter = parameters[i].second;
      if (!parameter.requires_grad()) continue;
      fnv_mix(hash, static_cast<int64_t>(k));
      fnv_mix(hash, static_cast<int64_t>(i));
      for (const int64_t size : parameter.sizes()) fnv_mix(hash, size);
      ++tensors;
      values += parameter.numel();
    }
  }
  return {kTrainedSetTag, static_cast<int64_t>(hash), tensors, values, static_cast<int64_t>(replaced_count)};
}

void SetUpModels::agree_on_trained_parameters(const std::vector<std::vector<size_t>>& replaced, const char* call) {
  const std::vector<int64_t> fields = trained_set_fields(replaced);
  const int64_t tensors = fields[2], values = fields[3];
  const size_t replaced_count = static_cast<size_t>(fields[4]);
  const int world = strategy_.collectives().placement().world_size;
  std::vector<std::vector<int64_t>> all;
  strategy_.collectives().run(
      call, [&] { all = all_gather_fields(strategy_.collectives().group(), strategy_.device(), world, fields); });
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
    throw std::runtime_error(
        "fabric.backward(): on rank " + std::to_string(strategy_.collectives().placement().global_rank) + " " + what +
        ", but rank" + (absent.find(',') != std::string::npos ? "s " : " ") + absent +
        " did not at this backward (they are in another collective)." + (replaced_count > 0 ? replaced_rule : rule));
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

void SetUpModels::follow(bool agree_anyway) {
  std::vector<size_t> changed;
  // Per model: the positions of the parameters replaced since last seen.
  std::vector<std::vector<size_t>> replaced(models_.size());
  const bool follows_places = strategy_.follows_replaced_parameters();
  bool any_replaced = false;
  for (size_t k = 0; k < models_.size(); ++k) {
    const auto& model = models_[k];
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
  if (strategy_.collectives().group()) {
    agree_on_trained_parameters(replaced, changed.empty() ? "fabric.backward() (sync check)" : kTrainedSetChangedCall);
  }
  if (changed.empty()) return;
  for (const size_t k : changed) {
    auto& model = models_[k];
    NamedParameters trained;
    for (size_t i = 0; i < model.parameters.size(); ++i) {
      const bool requires_grad = model.parameters[i].second.requires_grad();
      model.trained[i] = requires_grad ? 1 : 0;
      if (requires_grad) trained.push_back(model.parameters[i]);
    }
    // Local on every rank (a Reducer is built without communicating).
    if (replaced[k].empty()) {
      strategy_.trained_parameters_changed(model.address, trained);
    } else {
      strategy_.parameters_replaced(model.address, trained);
    }
    model.record_places();
  }
  if (!any_replaced || strategy_.collectives().placement().world_size == 1 || noted_replaced_parameters_) return;
  noted_replaced_parameters_ = true;
  if (strategy_.collectives().placement().global_rank != 0) return;
  size_t count = 0;
  std::string first;
  for (size_t k = 0; k < models_.size(); ++k) {
    for (const size_t i : replaced[k]) {
      if (count++ == 0) first = models_[k].parameters[i].first;
    }
  }
  write_stderr_line(
      "fabric: note: fabric.backward(): " + std::to_string(count) + " parameter tensor" + (count == 1 ? "" : "s") +
      " of the set-up models (first '" + first +
      "') got new storage after fabric.setup() (torch::load, Module::load, set_, set_data or ->to() replace a "
      "parameter's tensor data; copy_ does not). Fabric rebuilt their gradient synchronization under strategy '" +
      strategy_.name() +
      "' and checked that every rank holds the same values. fabric.load(path, state) loads in place. (Printed "
      "once, by rank 0.)");
}

}  // namespace detail
}  // namespace fabric
