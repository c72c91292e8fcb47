// The ddp strategy; see ddp.h.
#include "strategies/ddp.h"

#include "utilities/agreement.h"
#include "utilities/messages.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <unordered_map>

namespace fabric {
namespace detail {

namespace {
constexpr size_t kMiB = 1024 * 1024;
// PyTorch DDP's first bucket: small, so that communication starts early.
constexpr size_t kFirstBucketBytes = 1 * kMiB;
}  // namespace

std::pair<size_t, size_t> bucket_bytes(const Options& options) {
  const auto cap = static_cast<size_t>(std::llround(options.bucket_cap_mb() * kMiB));
  const size_t bucket = std::max<size_t>(cap, 1);
  return {std::min(kFirstBucketBytes, bucket), bucket};
}

DdpStrategy::DdpStrategy(const StrategyContext& context) : Strategy(context) {}
DdpStrategy::~DdpStrategy() = default;

void DdpStrategy::setup_module(const torch::nn::Module& module, const NamedParameters& trained) {
  if (!context_.group || trained.empty()) return;
  reducers_.push_back(make_model_reducer(&module, trained, context_.options.find_unused_parameters()));
}

void DdpStrategy::trained_parameters_changed(const torch::nn::Module* module, const NamedParameters& trained) {
  if (!context_.group) return;
  const auto found = std::find_if(reducers_.begin(), reducers_.end(),
                                  [module](const ModelReducer& model) { return model.module == module; });
  // find_unused_parameters before 2.4: what the micro-batches of an open
  // no_backward_sync window reached, carried over by tensor.
  std::unordered_map<const c10::TensorImpl*, char> reached_without_sync;
  bool accumulated = false;
  bool find_unused = context_.options.find_unused_parameters();
  bool synchronized_once = false;
  size_t position = reducers_.size();
  if (found != reducers_.end()) {
    accumulated = found->accumulated;
    find_unused = found->find_unused;
    synchronized_once = found->synchronized_once;
    for (size_t i = 0; i < found->reached_without_sync.size(); ++i) {
      reached_without_sync.emplace(found->parameters[i].second.unsafeGetTensorImpl(), found->reached_without_sync[i]);
    }
    position = static_cast<size_t>(found - reducers_.begin());
    // Destroyed before its successor is built: its autograd hooks go with it.
    reducers_.erase(found);
  }
  if (trained.empty()) return;
  ModelReducer replacement = make_model_reducer(module, trained, find_unused);
  replacement.synchronized_once = synchronized_once;
  if (accumulated) {
    replacement.accumulated = true;
    replacement.reached_without_sync.assign(trained.size(), 0);
    for (size_t i = 0; i < trained.size(); ++i) {
      const auto earlier = reached_without_sync.find(trained[i].second.unsafeGetTensorImpl());
      if (earlier != reached_without_sync.end()) replacement.reached_without_sync[i] = earlier->second;
    }
  }
  // The same place as before: every rank arms its Reducers in one order.
  reducers_.insert(reducers_.begin() + static_cast<std::ptrdiff_t>(position), std::move(replacement));
}

DdpStrategy::ModelReducer DdpStrategy::make_model_reducer(const torch::nn::Module* module,
                                                          const NamedParameters& trained, bool find_unused) {
  std::vector<at::Tensor> parameters;
  for (const auto& item : trained) parameters.push_back(item.second);
  const auto [first_bucket, bucket] = bucket_bytes(context_.options);
  // As PyTorch's DDP: a small first bucket, then bucket_cap_mb buckets; both
  // lists reversed because gradients arrive roughly in reverse order of
  // parameter creation.
  auto assignment = c10d::compute_bucket_assignment_by_size(parameters, {first_bucket, bucket},
                                                            std::vector<bool>(parameters.size(), false));
  auto bucket_indices = std::move(std::get<0>(assignment));
  auto per_bucket_size_limits = std::move(std::get<1>(assignment));
  std::reverse(bucket_indices.begin(), bucket_indices.end());
  std::reverse(per_bucket_size_limits.begin(), per_bucket_size_limits.end());
  // The names go into the Reducer's own messages (TORCH_DISTRIBUTED_DEBUG).
  std::unordered_map<size_t, std::string> names;
  for (size_t i = 0; i < trained.size(); ++i) names.emplace(i, trained[i].first);
  std::shared_ptr<c10d::Reducer> reducer = c10d_compat::make_reducer(
      std::move(parameters), std::move(bucket_indices), std::move(per_bucket_size_limits), context_.group,
      static_cast<int64_t>(bucket), static_cast<int64_t>(first_bucket), find_unused, std::move(names));
  // PyTorch's DDP gives every Reducer a c10d::Logger, and the Reducer relies
  // on it: with find_unused_parameters, the first time the set of unused
  // parameters changes between iterations (a head used on some steps only)
  // it calls its logger without checking that there is one (1.13 and 2.x),
  // which crashed the process.
  auto logger = std::make_shared<c10d::Logger>(reducer);
  reducer->set_logger(logger);
  ModelReducer model;
  model.module = module;
  model.parameters = trained;
  model.reducer = std::move(reducer);
  model.logger = std::move(logger);
  model.find_unused = find_unused;
  return model;
}

void DdpStrategy::check_backward(const std::vector<ReachedModel>& models) const {
  // Without find_unused_parameters the Reducer waits for a gradient of every
  // parameter it watches; one this backward does not reach would leave its
  // bucket unreduced and the ranks out of sync. Said here, naming them,
  // before anything is armed or sent. A model's first synchronized backward
  // with the option unchosen is agreed on in before_backward instead.
  std::vector<std::string> unreached;
  for (const auto& model : reducers_) {
    if (model.find_unused) continue;
    if (!model.synchronized_once && !context_.options.find_unused_parameters_chosen()) continue;
    const auto reached = std::find_if(models.begin(), models.end(), [&](const ReachedModel& item) {
      return item.module == model.module && item.synchronized && item.graph != nullptr;
    });
    if (reached == models.end()) continue;  // not armed for this backward
    for (const auto& [name, parameter] : model.parameters) {
      if (!reached->graph->reaches(parameter)) unreached.push_back(name);
    }
  }
  if (unreached.empty()) return;
  throw std::runtime_error(unreached_message(unreached));
}

std::string DdpStrategy::unreached_message(const std::vector<std::string>& unreached) const {
  // All of them would be too many for one line on a large model.
  constexpr size_t kNamesShown = 12;
  auto listed = [](const std::vector<std::string>& names) {
    std::string text;
    for (size_t i = 0; i < names.size() && i < kNamesShown; ++i) {
      text += (i > 0 ? ", " : "") + names[i];
    }
    if (names.size() > kNamesShown) {
      text += " and " + std::to_string(names.size() - kNamesShown) + " more";
    }
    return text;
  };
  const std::string enable = context_.strategy == "ddp"
                                 ? "construct the Fabric with strategy \"ddp_find_unused_parameters_true\" (or "
                                   "fabric::Options().find_unused_parameters(true); fabric-run --strategy "
                                   "ddp_find_unused_parameters_true and LT_STRATEGY work too)"
                                 : "construct the Fabric with fabric::Options().find_unused_parameters(true)";
  return "fabric.backward(): on rank " + std::to_string(context_.rank) + ", " + std::to_string(unreached.size()) +
         " trained parameter" + (unreached.size() == 1 ? " of a set-up model gets" : "s of a set-up model get") +
         " no gradient in this backward (the loss does not depend on them): " + listed(unreached) +
         ". Under strategy '" + context_.strategy +
         "' a bucket of gradients is all-reduced once every parameter in it has its gradient, so "
         "theirs never would be and the ranks would train different models. If the model uses "
         "some parameters only on some steps (a branch or a head taken on some iterations or "
         "inputs), " +
         enable +
         ": the parameters a backward does not reach are then found by a search of its graph "
         "before it runs. If they are not trained, set requires_grad(false) on them (Fabric "
         "then leaves them out of the synchronization, also when that happens after "
         "fabric.setup()), or remove them";
}

namespace {

// What every rank contributes to the agreement on unused parameters: a tag
// (a rank in another collective sends other data), the set's hash and size.
constexpr int64_t kUnusedSetTag = 0x4661627269635555;  // "FabricUU"

}  // namespace

void DdpStrategy::agree_on_unused_parameters(ModelReducer& model, const ReachedModel& reached) {
  model.synchronized_once = true;
  std::vector<std::string> unreached;
  uint64_t hash = kFnvOffset;
  for (size_t i = 0; i < model.parameters.size(); ++i) {
    if (reached.graph->reaches(model.parameters[i].second)) continue;
    unreached.push_back(model.parameters[i].first);
    fnv_mix(hash, static_cast<int64_t>(i));
  }
  const std::vector<int64_t> fields{kUnusedSetTag, static_cast<int64_t>(hash), static_cast<int64_t>(unreached.size())};
  const auto all = all_gather_fields(context_.group, context_.device, context_.world_size, fields);
  bool agree = true;
  std::string counts;
  for (int r = 0; r < context_.world_size; ++r) {
    const auto& values = all[static_cast<size_t>(r)];
    if (values[0] != kUnusedSetTag || values[1] != fields[1] || values[2] != fields[2]) agree = false;
    counts += (r == 0 ? "rank 0: " : ", rank " + std::to_string(r) + ": ") +
              (values[0] == kUnusedSetTag ? std::to_string(values[2]) : std::string("in another collective"));
  }
  if (!agree) {
    // Every rank throws: those that reach everything too, so that no rank
    // waits in a reduction the others never start.
    throw std::runtime_error(
        "fabric.backward(): the ranks disagree on which trained parameters this first backward leaves without a "
        "gradient (" +
        counts + ")" +
        (unreached.empty() ? std::string(". On rank ") + std::to_string(context_.rank) + " the loss reaches all of them"
                           : ". " + unreached_message(unreached)));
  }
  if (unreached.empty()) return;
  // The same set on every rank: nothing trains them anywhere, so the ranks
  // stay one model once the Reducer marks them ready itself.
  const size_t position = static_cast<size_t>(&model - reducers_.data());
  const NamedParameters parameters = model.parameters;
  const torch::nn::Module* module = model.module;
  reducers_[position] = ModelReducer{};  // its hooks go before the successor's come
  reducers_[position] = make_model_reducer(module, parameters, /*find_unused=*/true);
  reducers_[position].synchronized_once = true;
  if (context_.rank != 0 || noted_unused_parameters_) return;
  noted_unused_parameters_ = true;
  std::string names;
  for (size_t i = 0; i < unreached.size() && i < 6; ++i) names += (i > 0 ? ", " : "") + unreached[i];
  if (unreached.size() > 6) names += " and " + std::to_string(unreached.size() - 6) + " more";
  write_stderr_line("fabric: note: fabric.backward(): the first backward leaves " + std::to_string(unreached.size()) +
                    " trained parameter" + (unreached.size() == 1 ? "" : "s") +
                    " of a set-up model without a gradient on every rank (" + names +
                    "), so Fabric turned on find_unused_parameters for this model: each backward now searches its "
                    "graph for them (a cost per step; as PyTorch's find_unused_parameters=True). If they are never "
                    "trained, set requires_grad(false) on them before fabric.setup(), or remove them; strategy "
                    "\"ddp_find_unused_parameters_false\" (or Options().find_unused_parameters(false)) stops at "
                    "such a backward instead. (Printed once, by rank 0.)");
}

void DdpStrategy::before_backward(const std::vector<ReachedModel>& models, const at::Tensor& loss) {
  // C++ offers no hook around the user's forward(), where PyTorch's DDP arms
  // its Reducer. Arming it here is equivalent: nothing reaches the Reducer
  // between forward and backward. rebuild_buckets() is a collective that
  // reorders buckets once, after the first backward, by gradient arrival.
  // A model that this backward does not reach, or that is under
  // no_backward_sync, is not armed: a Reducer armed for a backward that
  // never reaches its parameters would wait for them forever, and an unarmed
  // one lets gradients accumulate locally.
  for (auto& model : reducers_) {
    if (model.find_unused || model.synchronized_once || context_.options.find_unused_parameters_chosen()) continue;
    const auto reached = std::find_if(models.begin(), models.end(), [&](const ReachedModel& item) {
      return item.module == model.module && item.synchronized && item.graph != nullptr;
    });
    if (reached != models.end()) agree_on_unused_parameters(model, *reached);
  }
  if (!c10d_compat::kReducerCountsUsageUnderNoSync) note_reached_parameters(models);
  for (auto& model : reducers_) {
    const bool armed = std::any_of(models.begin(), models.end(), [&](const ReachedModel& reached) {
      return reached.module == model.module && reached.synchronized;
    });
    if (!armed) continue;
    try {
      model.reducer->prepare_for_forward();
      model.reducer->rebuild_buckets();
      // With find_unused_parameters the Reducer searches the graph from the
      // outputs for the parameters it does not reach and marks them ready.
      if (model.find_unused) {
        model.reducer->prepare_for_backward({loss});
      } else {
        model.reducer->prepare_for_backward({});
      }
    } catch (const c10::Error& error) {
      // The Reducer's own words are for Python users.
      const std::string message = error.what_without_backtrace();
      if (message.find("find_unused_parameters") == std::string::npos) throw;
      throw std::runtime_error(
          "fabric.backward(): the previous backward did not reach every trained parameter of "
          "a set-up model (a parameter took no part in computing the loss), so its gradient "
          "reduction never finished. If some parameters are unused on purpose, construct the "
          "Fabric with fabric::Options().find_unused_parameters(true); otherwise make every "
          "parameter take part in the loss, or set requires_grad(false) on the unused ones "
          "before fabric.setup(). Reducer: " +
          message.substr(0, message.find('\n')));
    }
  }
}

void DdpStrategy::note_reached_parameters(const std::vector<ReachedModel>& models) {
  for (auto& model : reducers_) {
    if (!model.find_unused) continue;
    const auto reached = std::find_if(models.begin(), models.end(), [&](const ReachedModel& item) {
      return item.module == model.module && item.graph != nullptr;
    });
    if (reached == models.end()) continue;
    const size_t count = model.parameters.size();
    if (!reached->synchronized) {
      model.reached_without_sync.resize(count, 0);
      for (size_t i = 0; i < count; ++i) {
        if (reached->graph->reaches(model.parameters[i].second)) model.reached_without_sync[i] = 1;
      }
      model.accumulated = true;
    } else if (model.accumulated) {
      // Read now: the graph is freed while backward runs.
      model.reached_by_sync.assign(count, 0);
      for (size_t i = 0; i < count; ++i) {
        model.reached_by_sync[i] = reached->graph->reaches(model.parameters[i].second) ? 1 : 0;
      }
      model.average_after_backward = true;
    }
  }
}

void DdpStrategy::after_backward(const std::vector<ReachedModel>& models) {
  (void)models;
  for (auto& model : reducers_) {
    if (!model.average_after_backward) continue;
    average_gradients_used_only_without_sync(model);
    model.average_after_backward = false;
    model.accumulated = false;
    model.reached_without_sync.clear();
    model.reached_by_sync.clear();
  }
}

void DdpStrategy::average_gradients_used_only_without_sync(ModelReducer& model) {
  // Every rank ran micro-batches under no_backward_sync before this
  // backward (the same loop), so every rank is here: one all-reduce (max)
  // of [used in any pass since the last sync, reached by this one].
  const size_t count = model.parameters.size();
  auto usage = at::zeros({static_cast<int64_t>(2 * count)}, at::kInt);
  auto* flags = usage.data_ptr<int32_t>();
  for (size_t i = 0; i < count; ++i) {
    const bool without_sync = i < model.reached_without_sync.size() && model.reached_without_sync[i];
    flags[i] = without_sync || model.reached_by_sync[i] ? 1 : 0;
    flags[count + i] = model.reached_by_sync[i];
  }
  std::vector<at::Tensor> usage_tensors{usage.to(context_.device)};
  c10d::AllreduceOptions max_options;
  max_options.reduceOp = c10d::ReduceOp::MAX;
  context_.group->allreduce(usage_tensors, max_options)->wait();
  const auto global = usage_tensors[0].cpu();
  const auto* global_flags = global.data_ptr<int32_t>();

  // One flat sum per dtype; a rank without a gradient adds zeros.
  at::NoGradGuard no_grad;
  std::map<at::ScalarType, std::vector<size_t>> by_dtype;
  for (size_t i = 0; i < count; ++i) {
    if (global_flags[i] != 0 && global_flags[count + i] == 0) {
      by_dtype[model.parameters[i].second.scalar_type()].push_back(i);
    }
  }
  for (const auto& [dtype, members] : by_dtype) {
    std::vector<at::Tensor> pieces;
    for (size_t i : members) {
      const auto& parameter = model.parameters[i].second;
      const auto& gradient = parameter.grad();
      pieces.push_back(gradient.defined()
                           ? gradient.reshape({-1})
                           : at::zeros({parameter.numel()},
                                       at::TensorOptions().dtype(parameter.scalar_type()).device(parameter.device())));
    }
    std::vector<at::Tensor> flat{at::cat(pieces)};
    context_.group->allreduce(flat)->wait();  // SUM
    flat[0].div_(context_.world_size);
    int64_t offset = 0;
    for (size_t i : members) {
      auto& parameter = model.parameters[i].second;
      const auto average = flat[0].narrow(0, offset, parameter.numel()).view(parameter.sizes());
      offset += parameter.numel();
      if (parameter.grad().defined()) {
        parameter.mutable_grad().copy_(average);
      } else {
        parameter.mutable_grad() = average.clone();
      }
    }
  }
}

void DdpStrategy::forget_module(const torch::nn::Module* module) {
  // Its Reducer watches the old model's parameters, which no backward
  // reaches any more; destroying it removes its autograd hooks.
  reducers_.erase(std::remove_if(reducers_.begin(), reducers_.end(),
                                 [module](const ModelReducer& model) { return model.module == module; }),
                  reducers_.end());
}

}  // namespace detail
}  // namespace fabric
