// The sharded strategies "zero1" and "zero2" (ZeRO stages 1 and 2).
//
// Every trained parameter of a set-up model gets one owner rank (greedy by
// size: largest first, onto the rank that owns the fewest bytes so far).
// Only the owner keeps the parameter's optimizer state: LibTorch's
// optimizers skip parameters whose gradient is undefined, and create their
// state lazily (Adam, AdamW, RMSprop, Adagrad, SGD with momentum), so
// fabric.step() hides the gradients of parameters this rank does not own
// while it steps, then broadcasts each parameter from its owner.
//
//   zero1  gradients are all-reduced by a c10d::Reducer, overlapped with
//          backward, exactly as under ddp: every rank holds every averaged
//          gradient (clip_gradients, gradient inspection work as under ddp).
//   zero2  gradients are reduced to their owners in buckets, overlapped
//          with backward as DDP's Reducer overlaps its all-reduce: buckets
//          follow the order gradients arrive in (the reverse of the
//          parameters'), a small first one, then bucket_cap_mb ones, each
//          split by owner. A bucket's transfer starts from the
//          AccumulateGrad hook of its last gradient, strictly in bucket
//          order (every rank starts the same transfers in the same order,
//          whatever order its gradients come in): each other rank sends the
//          bucket straight to its owner (c10d send/recv; the owner's
//          receives are posted when the pass starts), and the owner adds
//          what it receives to its own gradients and averages. That moves
//          (N-1)/N of the gradients per rank, as a reduce-scatter does;
//          Gloo's reduce (1.13 has no reduce_scatter) moved as much as an
//          all-reduce. The other ranks drop those gradients (undefined) as
//          soon as they are in the bucket, so a rank holds ~1/N of the
//          gradients between backward and the next one. fabric.step() sends
//          the updated parameters back from their owners through the same
//          buckets' memory, every owner's broadcast in flight at once.
//
// optimizer.step() called directly would update only the owned parameters
// and leave the ranks with different models; every parameter's version
// counter is therefore recorded when Fabric last synchronized it, and the
// next Fabric call that depends on it (backward, step, save) throws if it
// moved.
#pragma once

#include "strategies/accumulation_hooks.h"
#include "strategies/ddp.h"
#include "strategies/gradient_read_hint.h"
#include "strategies/strategy.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace fabric {
namespace detail {

size_t bytes_of(const at::Tensor& tensor);
std::vector<at::Tensor> optimizer_parameters(const torch::optim::Optimizer& optimizer);
// A fresh, empty per-parameter state of the optimizer's own kind, for rank
// 0 to deserialize another rank's state into.
std::unique_ptr<torch::optim::OptimizerParamState> new_parameter_state(const torch::optim::Optimizer& optimizer);

class ZeroStrategy : public Strategy {
 public:
  ZeroStrategy(const StrategyContext& context, int stage)
      : Strategy(context),
        stage_(stage),
        gradient_read_hint_(context.strategy),
        hooks_([this](size_t index) { accumulated(index); }) {
    if (stage_ == 1) all_reduce_ = std::make_unique<DdpStrategy>(context);
  }

  void setup_module(const torch::nn::Module& module, const NamedParameters& trained) override {
    if (owned_bytes_.empty()) owned_bytes_.assign(static_cast<size_t>(context_.world_size), 0);
    models_.emplace_back();
    models_.back().module = &module;
    assign_members(models_.size() - 1, trained);
    if (stage_ == 1) all_reduce_->setup_module(module, trained);
  }

  // LoRA's second phase (the base unfrozen) or the reverse: a parameter
  // trained for the first time gets an owner (greedy, as at setup; the same
  // on every rank, which all change the set at the same backward); one
  // trained before keeps its owner, so the optimizer state it holds stays
  // where it is. Frozen parameters leave the reduction (zero2's buckets,
  // zero1's Reducer) and the check for optimizer.step().
  void trained_parameters_changed(const torch::nn::Module* module, const NamedParameters& trained) override {
    Model* model = find(module);
    if (model == nullptr) return;
    assign_members(static_cast<size_t>(model - models_.data()), trained);
    if (stage_ == 1) all_reduce_->trained_parameters_changed(module, trained);
  }

  void parameters_replaced(const torch::nn::Module* module, const NamedParameters& trained) override {
    trained_parameters_changed(module, trained);
    // Rank 0's values, broadcast by Fabric: what the ranks hold in common.
    for (auto& parameter : parameters_) parameter.version = parameter.tensor._version();
  }

  void setup_optimizer(torch::optim::Optimizer& optimizer) override {
    if (dynamic_cast<torch::optim::LBFGS*>(&optimizer) != nullptr) {
      throw std::invalid_argument("fabric::setup: strategy '" + context_.strategy +
                                  "' cannot run torch::optim::LBFGS: LBFGS computes one search direction from the "
                                  "gradients of all parameters, and under a sharded strategy each rank updates only "
                                  "the parameters it owns. Use strategy 'ddp' with LBFGS");
    }
  }

  bool needs_reached_models() const override { return !models_.empty(); }
  void check_backward(const std::vector<ReachedModel>& models) const override {
    if (stage_ == 1) all_reduce_->check_backward(models);  // zero2 reduces what there is
  }
  void use_group(const c10d_compat::ProcessGroupPtr& group) override {
    Strategy::use_group(group);
    if (all_reduce_) all_reduce_->use_group(group);
  }
  bool shards_gradients() const override { return stage_ >= 2 && context_.group; }

  void before_backward(const std::vector<ReachedModel>& models, const at::Tensor& loss) override {
    gradient_read_hint_.disarm();
    if (stage_ == 1) {
      all_reduce_->before_backward(models, loss);
      return;
    }
    // An owner's gradients hold the average of the last reduction. A
    // backward that accumulates onto them (no zero_grad, or micro-batches
    // under no_backward_sync) must not feed that average into the next
    // reduction as if it were this rank's own contribution: it is set aside
    // here and added back to the new average, as DDP's result would be.
    for (const auto& reached : models) {
      Model* model = find(reached.module);
      if (model == nullptr || !model->reduced) continue;
      model->reduced = false;
      model->set_aside.assign(model->members.size(), at::Tensor());
      for (size_t k = 0; k < model->members.size(); ++k) {
        auto& parameter = parameters_[model->members[k]];
        if (!updates_here(model->members[k])) continue;
        model->set_aside[k] = parameter.tensor.grad();
        parameter.tensor.mutable_grad() = at::Tensor();
      }
    }
    if (shards_gradients()) arm_buckets(models);
  }

  void after_backward(const std::vector<ReachedModel>& models) override {
    if (stage_ == 1) {  // the Reducer finished inside backward
      all_reduce_->after_backward(models);
      return;
    }
    finish_buckets();
    for (const auto& reached : models) {
      if (!reached.synchronized) continue;
      if (Model* model = find(reached.module)) finish_reduction(*model);
    }
    hint_gradient_reads(models);
  }

  bool agree_any(bool value) override {
    if (!shards_gradients()) return value;
    std::vector<at::Tensor> flag{
        at::full({1}, value ? 1 : 0, at::TensorOptions().dtype(at::kInt).device(context_.device))};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::MAX;
    context_.group->allreduce(flag, options)->wait();
    return flag[0].item<int>() != 0;
  }

  at::Tensor step(torch::optim::Optimizer& optimizer, const torch::optim::Optimizer::LossClosure& closure) override {
    gradient_read_hint_.disarm();
    check_in_sync("fabric.step()");
    // The closure (which calls fabric.backward) runs first, as the
    // optimizers' own step(closure) would, so that the gradients it
    // produces are hidden below too.
    at::Tensor loss;
    if (closure) {
      at::AutoGradMode enable_grad(true);
      loss = closure();
    }
    const auto parameters = optimizer_parameters(optimizer);
    // Parameters this rank does not own: no update, and no optimizer state.
    std::vector<std::pair<at::Tensor, at::Tensor>> hidden;
    for (const auto& parameter : parameters) {
      const Parameter* tracked = lookup(parameter);
      if (tracked == nullptr || updates_here(static_cast<size_t>(tracked - parameters_.data()))) continue;
      if (!parameter.grad().defined()) continue;
      hidden.emplace_back(parameter, parameter.grad());
      parameter.mutable_grad() = at::Tensor();
    }
    const auto restore = [&hidden] {
      for (auto& [parameter, gradient] : hidden) parameter.mutable_grad() = gradient;
    };
    try {
      step_owned(optimizer);
    } catch (...) {
      restore();
      throw;
    }
    restore();

    if (context_.group && stage_ < 3) broadcast_from_owners(parameters);
    for (const auto& parameter : parameters) {
      if (Parameter* tracked = lookup(parameter)) tracked->version = parameter._version();
    }
    return loss;
  }

  void check_in_sync(const char* call) override {
    for (const auto& parameter : parameters_) {
      if (!parameter.trained || parameter.tensor._version() == parameter.version) continue;
      throw std::logic_error(
          std::string("fabric: ") + call + ": set-up parameter '" + parameter.name +
          "' was changed in place after Fabric last synchronized it (its last fabric.step() or fabric.load()): by "
          "optimizer.step() called directly, or by copy_, an assignment or torch::load/Module::load into the "
          "set-up model. Under strategy '" +
          context_.strategy +
          "' each rank updates only the parameters it owns, so such a change leaves the ranks with different "
          "models: call fabric.step(optimizer) instead of optimizer.step() (it steps the optimizer and broadcasts "
          "the updated parameters from their owners); load values with fabric.load(path, state), which every rank "
          "calls; copy weights (a teacher's, an EMA's) before fabric.setup()");
    }
  }

  void forget_module(const torch::nn::Module* module) override {
    // The old model's parameters keep their owners (no backward reaches
    // them); only the address is released.
    for (auto& model : models_) {
      if (model.module == module) model.module = nullptr;
    }
    if (all_reduce_) all_reduce_->forget_module(module);
  }

  void module_loaded(const torch::nn::Module& module) override {
    (void)module;
    for (auto& parameter : parameters_) parameter.version = parameter.tensor._version();
  }

  std::function<void()> gather_optimizer_state(torch::optim::Optimizer& optimizer) override {
    check_in_sync("fabric.save()");
    if (!context_.group) return {};
    const auto parameters = optimizer_parameters(optimizer);
    std::string blob;
    if (context_.rank != 0) {
      blob = serialize_states(optimizer, parameters, [&](size_t i) {
        const Parameter* tracked = lookup(parameters[i]);
        return tracked != nullptr && tracked->owner == context_.rank;
      });
    }
    const auto blobs = gather_to(0, blob);
    if (context_.rank != 0) return {};

    using Key = decltype(c10d_compat::optimizer_state_key(optimizer, parameters.front()));
    std::vector<Key> inserted;
    const auto undo = [&optimizer](const std::vector<Key>& keys) {
      for (const auto& key : keys) optimizer.state().erase(key);
    };
    try {
      for (const auto& bytes : blobs) {
        for (auto& [position, nested] : read_states(bytes)) {
          auto state = new_parameter_state(optimizer);
          state->serialize(*nested);
          auto key = c10d_compat::optimizer_state_key(optimizer, parameters.at(static_cast<size_t>(position)));
          optimizer.state()[key] = std::move(state);
          inserted.push_back(std::move(key));
        }
      }
    } catch (...) {
      undo(inserted);
      throw;
    }
    return [undo, inserted] { undo(inserted); };
  }

  void optimizer_loaded(torch::optim::Optimizer& optimizer) override {
    for (const auto& parameter : optimizer_parameters(optimizer)) {
      const Parameter* tracked = lookup(parameter);
      if (tracked == nullptr || tracked->owner == context_.rank) continue;
      optimizer.state().erase(c10d_compat::optimizer_state_key(optimizer, parameter));
    }
  }

 protected:
  // After a synchronized backward's reduction: the gradients are shares
  // until the step or the next backward (gradient_read_hint.h).
  void hint_gradient_reads(const std::vector<ReachedModel>& models) {
    if (!shards_gradients()) return;
    for (const auto& reached : models) {
      if (reached.synchronized && find(reached.module) != nullptr) {
        gradient_read_hint_.arm();
        return;
      }
    }
  }

  struct Parameter {
    at::Tensor tensor;
    std::string name;
    int owner;
    int64_t version;       // when Fabric last synchronized it
    size_t model;          // index into models_ of the model reducing it (the first set up with it)
    bool trained;          // requires grad, as the model's last setup or change said
    size_t bucket = 0;     // zero2: index into its model's buckets
    bool hooked = false;   // zero2: its AccumulateGrad node tells accumulated()
    bool awaited = false;  // zero2: this backward pass is to accumulate its gradient
  };
  // zero2: gradients of one owner and dtype, reduced to the owner together.
  struct Bucket {
    int owner;
    at::ScalarType dtype;
    std::vector<size_t> members;  // indices into parameters_
    int64_t numel = 0;
    // The members' gradients end to end, then one flag per member (1 where
    // this rank has a gradient, so that a parameter no rank reached keeps an
    // undefined one): a part of its region's memory.
    at::Tensor flat;
    size_t region = 0;   // index into its model's regions
    int64_t offset = 0;  // where `flat` starts in the region
    // The owner's: where the other ranks' flats arrive (`flat` itself, then
    // world size - 2 more).
    std::vector<at::Tensor> received;
    int64_t pending = 0;  // this pass: gradients still to be accumulated
    // This pass: the owner's receives (one per other rank, posted when the
    // pass starts), or another rank's send.
    std::vector<c10d_compat::WorkPtr> transfers;
  };
  // zero2: the buckets of one owner and dtype end to end, in one block of
  // memory kept between passes (no pages to fault in per step), through
  // which fabric.step() also broadcasts the members' new values: one
  // broadcast per owner.
  struct Region {
    int owner;
    at::ScalarType dtype;
    std::vector<size_t> buckets;  // indices into its model's buckets, in order
    int64_t numel = 0;
    at::Tensor memory;    // allocated by the first pass
    at::Tensor received;  // the owner's, with 3+ ranks: world size - 2 times `memory`'s size
  };
  struct Model {
    const torch::nn::Module* module = nullptr;
    std::vector<size_t> members;        // indices into parameters_
    std::vector<Bucket> buckets;        // zero2, in the order backward produces their gradients
    std::vector<Region> regions;        // zero2
    bool reduced = false;               // owners' gradients hold an average
    std::vector<at::Tensor> set_aside;  // per member: that average, while accumulating
  };

  Model* find(const torch::nn::Module* module) {
    for (auto& model : models_) {
      if (model.module == module) return &model;
    }
    return nullptr;
  }
  Parameter* lookup(const at::Tensor& tensor) {
    const auto found = index_.find(tensor.unsafeGetTensorImpl());
    return found == index_.end() ? nullptr : &parameters_[found->second];
  }

  // models_[m]'s members become the parameters of `trained` it reduces:
  // those it brought first (one shared with a model set up earlier keeps its
  // owner and is reduced with that model, unless that model no longer trains
  // it). New ones get an owner: largest
  // first, onto the rank that owns the fewest bytes so far. zero2: the
  // model's buckets are rebuilt.
  void assign_members(size_t m, const NamedParameters& trained) {
    Model& model = models_[m];
    std::unordered_set<size_t> trained_before;
    for (size_t index = 0; index < parameters_.size(); ++index) {
      if (parameters_[index].model != m) continue;
      if (parameters_[index].trained) trained_before.insert(index);
      parameters_[index].trained = false;
    }
    model.members.clear();
    std::vector<size_t> fresh;
    for (const auto& [name, tensor] : trained) {
      const auto known = index_.find(tensor.unsafeGetTensorImpl());
      size_t index = 0;
      if (known == index_.end()) {
        index = parameters_.size();
        index_[tensor.unsafeGetTensorImpl()] = index;
        parameters_.push_back({tensor, name, -1, tensor._version(), m, true});
        fresh.push_back(index);
      } else {
        index = known->second;
        // Reduced with the model set up first with it; one that model does
        // not train (a loose set of an optimizer's parameters released it to
        // the model now set up) is taken over, with its owner.
        if (parameters_[index].model != m) {
          if (parameters_[index].trained) continue;
          parameters_[index].model = m;
        }
      }
      auto& parameter = parameters_[index];
      // Frozen until now: Fabric did not watch it, and it is in sync (the
      // ranks froze and unfroze it together).
      if (trained_before.count(index) == 0) parameter.version = tensor._version();
      parameter.trained = true;
      model.members.push_back(index);
    }
    // Heaviest first, ties in the order found (every rank assigns the same
    // owners). std::sort over positions: libstdc++'s stable_sort draws on a
    // buffer clang++-19 reports as deprecated.
    std::vector<size_t> by_weight(fresh.size());
    std::iota(by_weight.begin(), by_weight.end(), size_t{0});
    std::sort(by_weight.begin(), by_weight.end(), [&](size_t a, size_t b) {
      const auto bytes_a = bytes_of(parameters_[fresh[a]].tensor);
      const auto bytes_b = bytes_of(parameters_[fresh[b]].tensor);
      return bytes_a != bytes_b ? bytes_a > bytes_b : a < b;
    });
    for (size_t position : by_weight) {
      const size_t index = fresh[position];
      const auto lightest = std::min_element(owned_bytes_.begin(), owned_bytes_.end());
      parameters_[index].owner = static_cast<int>(lightest - owned_bytes_.begin());
      *lightest += bytes_of(parameters_[index].tensor);
    }
    if (stage_ == 2) build_buckets(model);
  }

  // zero2: the model's buckets in the order backward produces gradients
  // (the reverse of the parameters'), as DDP's Reducer forms them: a first
  // window of about 1 MiB, so that the first reduce starts early, then
  // windows of bucket_cap_mb; a window's parameters go into one bucket per
  // owner and dtype. Every rank forms the same buckets.
  void build_buckets(Model& model) {
    model.buckets.clear();
    const auto [first_window, window_cap] = bucket_bytes(context_.options);
    std::vector<size_t> window;
    size_t window_bytes = 0;
    const auto close_window = [&] {
      for (int owner = 0; owner < context_.world_size; ++owner) {
        std::vector<at::ScalarType> dtypes;  // in the order found
        for (size_t index : window) {
          const auto& parameter = parameters_[index];
          const auto dtype = parameter.tensor.scalar_type();
          if (parameter.owner == owner && std::find(dtypes.begin(), dtypes.end(), dtype) == dtypes.end())
            dtypes.push_back(dtype);
        }
        for (const auto dtype : dtypes) {
          Bucket bucket{owner, dtype, {}};
          for (size_t index : window) {
            const auto& parameter = parameters_[index];
            if (parameter.owner != owner || parameter.tensor.scalar_type() != dtype) continue;
            bucket.members.push_back(index);
            bucket.numel += parameter.tensor.numel();
          }
          model.buckets.push_back(std::move(bucket));
        }
      }
      window.clear();
      window_bytes = 0;
    };
    for (auto member = model.members.rbegin(); member != model.members.rend(); ++member) {
      window.push_back(*member);
      window_bytes += bytes_of(parameters_[*member].tensor);
      if (window_bytes >= (model.buckets.empty() ? first_window : window_cap)) close_window();
    }
    if (!window.empty()) close_window();
    model.regions.clear();
    for (size_t b = 0; b < model.buckets.size(); ++b) {
      Bucket& bucket = model.buckets[b];
      auto region = std::find_if(model.regions.begin(), model.regions.end(), [&](const Region& candidate) {
        return candidate.owner == bucket.owner && candidate.dtype == bucket.dtype;
      });
      if (region == model.regions.end()) region = model.regions.insert(region, Region{bucket.owner, bucket.dtype, {}});
      bucket.region = static_cast<size_t>(region - model.regions.begin());
      bucket.offset = region->numel;
      region->buckets.push_back(b);
      region->numel += bucket.numel + static_cast<int64_t>(bucket.members.size());
    }
    for (size_t b = 0; b < model.buckets.size(); ++b) {
      for (size_t index : model.buckets[b].members) {
        Parameter& parameter = parameters_[index];
        parameter.bucket = b;
        if (context_.group && !parameter.hooked) {
          hooks_.add(parameter.tensor, index);
          parameter.hooked = true;
        }
      }
    }
  }

  // zero2, before a synchronized backward: the buckets of the models it
  // reaches, in one order on every rank (the models in the order they were
  // set up), each waiting for the gradients this rank's pass accumulates.
  // A bucket that waits for none (gradients accumulated under
  // no_backward_sync that this pass does not reach) starts at once, in turn.
  void arm_buckets(const std::vector<ReachedModel>& models) {
    sequence_.clear();  // a pass that threw left its own: nothing waits on it
    next_in_sequence_ = 0;
    for (size_t m = 0; m < models_.size(); ++m) {
      const auto reached = std::find_if(models.begin(), models.end(), [&](const ReachedModel& candidate) {
        return candidate.synchronized && candidate.module == models_[m].module;
      });
      if (reached == models.end() || models_[m].module == nullptr) continue;
      for (size_t b = 0; b < models_[m].buckets.size(); ++b) {
        Bucket& bucket = models_[m].buckets[b];
        bucket.pending = 0;
        bucket.transfers.clear();
        for (size_t index : bucket.members) {
          Parameter& parameter = parameters_[index];
          parameter.awaited = reached->graph != nullptr && reached->graph->reaches(parameter.tensor);
          bucket.pending += parameter.awaited ? 1 : 0;
        }
        // The owner's receives, before its gradients exist: another rank's
        // send completes as soon as it is made.
        if (bucket.owner == context_.rank) post_receives(models_[m], bucket, static_cast<int>(sequence_.size()));
        sequence_.emplace_back(m, b);
      }
    }
    start_ready_buckets();
  }

  // `tag` (the bucket's place in the sequence) pairs each send with its
  // receive.
  void post_receives(Model& model, Bucket& bucket, int tag) {
    ensure_memory(model, model.regions[bucket.region]);
    size_t k = 0;
    for (int rank = 0; rank < context_.world_size; ++rank) {
      if (rank == context_.rank) continue;
      std::vector<at::Tensor> tensors{bucket.received[k++]};
      bucket.transfers.push_back(context_.group->recv(tensors, rank, tag));
    }
  }

  // zero2: autograd accumulated parameters_[index]'s gradient (its
  // AccumulateGrad hook, on the thread running backward).
  void accumulated(size_t index) {
    if (index >= parameters_.size() || !parameters_[index].awaited) return;
    Parameter& parameter = parameters_[index];
    parameter.awaited = false;
    Bucket& bucket = models_[parameter.model].buckets[parameter.bucket];
    if (--bucket.pending == 0) start_ready_buckets();
  }

  // Starts the transfers of the buckets that are complete, strictly in
  // sequence: a complete bucket waits for the ones before it, so that every
  // rank starts the same transfers in the same order.
  void start_ready_buckets() {
    while (next_in_sequence_ < sequence_.size()) {
      const auto [m, b] = sequence_[next_in_sequence_];
      Bucket& bucket = models_[m].buckets[b];
      if (bucket.pending > 0) return;
      start_reduce(models_[m], bucket, static_cast<int>(next_in_sequence_));
      ++next_in_sequence_;
    }
  }

  // The region's memory, and its buckets' flats in it, from the first use
  // on; on the owner, the receive buffers too.
  void ensure_memory(Model& model, Region& region) {
    if (region.memory.defined()) return;
    const auto options = at::TensorOptions().dtype(region.dtype).device(context_.device);
    region.memory = at::empty({region.numel}, options);
    const bool owner = region.owner == context_.rank;
    const int64_t more = context_.world_size - 2;
    if (owner && more > 0) region.received = at::empty({more * region.numel}, options);
    for (size_t b : region.buckets) {
      Bucket& bucket = model.buckets[b];
      const int64_t size = bucket.numel + static_cast<int64_t>(bucket.members.size());
      bucket.flat = region.memory.narrow(0, bucket.offset, size);
      bucket.received.clear();
      if (!owner) continue;
      bucket.received.push_back(bucket.flat);
      for (int64_t k = 0; k < more; ++k) {
        bucket.received.push_back(region.received.narrow(0, k * region.numel + bucket.offset, size));
      }
    }
  }

  // Another rank's part: the bucket's gradients into its flat, which goes
  // to the owner.
  void start_reduce(Model& model, Bucket& bucket, int tag) {
    if (bucket.owner == context_.rank) return;  // its receives were posted when the pass was armed
    const auto count = static_cast<int64_t>(bucket.members.size());
    ensure_memory(model, model.regions[bucket.region]);
    std::vector<float> flags(static_cast<size_t>(count), 0.0f);
    int64_t offset = 0;
    for (int64_t k = 0; k < count; ++k) {
      auto& parameter = parameters_[bucket.members[static_cast<size_t>(k)]];
      const int64_t numel = parameter.tensor.numel();
      const at::Tensor gradient = parameter.tensor.grad();
      if (gradient.defined()) {
        bucket.flat.narrow(0, offset, numel).copy_(gradient.reshape({-1}));
        flags[static_cast<size_t>(k)] = 1;
      } else {
        bucket.flat.narrow(0, offset, numel).zero_();
      }
      parameter.tensor.mutable_grad() = at::Tensor();  // freed as soon as it is in the bucket
      offset += numel;
    }
    bucket.flat.narrow(0, bucket.numel, count).copy_(at::tensor(flags));
    std::vector<at::Tensor> tensors{bucket.flat};
    bucket.transfers.push_back(context_.group->send(tensors, bucket.owner, tag));
  }

  // zero2, after backward: the buckets whose hooks did not all run (a
  // gradient that autograd did not accumulate after all) start now, in
  // sequence; then each owner takes the average of its buckets.
  void finish_buckets() {
    if (sequence_.empty()) return;
    for (const auto& [m, b] : sequence_) {
      Bucket& bucket = models_[m].buckets[b];
      bucket.pending = 0;
      for (size_t index : bucket.members) parameters_[index].awaited = false;
    }
    start_ready_buckets();
    const double world = context_.world_size;
    for (const auto& [m, b] : sequence_) {
      Bucket& bucket = models_[m].buckets[b];
      for (auto& transfer : bucket.transfers) transfer->wait();
      bucket.transfers.clear();
      if (bucket.owner != context_.rank) continue;
      const auto count = static_cast<int64_t>(bucket.members.size());
      std::vector<at::Tensor> flags;  // per other rank
      for (const auto& flat : bucket.received)
        flags.push_back(flat.narrow(0, bucket.numel, count).to(at::kFloat).cpu());
      int64_t offset = 0;
      for (int64_t k = 0; k < count; ++k) {
        auto& parameter = parameters_[bucket.members[static_cast<size_t>(k)]];
        const int64_t numel = parameter.tensor.numel();
        // This rank's own gradient plus what the others sent. A tensor of
        // its own, not a view of the bucket: the bucket is overwritten by
        // the next pass, and optimizer.zero_grad() detaches gradients in
        // place, which a view refuses.
        at::Tensor gradient = parameter.tensor.grad();
        for (size_t r = 0; r < bucket.received.size(); ++r) {
          if (flags[r].data_ptr<float>()[k] <= 0) continue;
          const auto sent = bucket.received[r].narrow(0, offset, numel).view(parameter.tensor.sizes());
          if (gradient.defined()) {
            gradient.add_(sent);
          } else {
            gradient = sent.clone();
          }
        }
        if (gradient.defined()) {
          gradient.div_(world);
          if (!parameter.tensor.grad().defined()) parameter.tensor.mutable_grad() = gradient;
        }
        offset += numel;
      }
    }
    sequence_.clear();
    next_in_sequence_ = 0;
  }

  // After the owners stepped: every parameter of `parameters` (an
  // optimizer's) goes from its owner to the other ranks. zero2 sends each
  // region whose members the optimizer all holds in one broadcast, through
  // the region's memory, every owner's in flight at once; the rest go
  // through c10d's coalesced broadcast, owner by owner. The same order on
  // every rank.
  void broadcast_from_owners(const std::vector<at::Tensor>& parameters) {
    std::unordered_set<size_t> stepped;  // indices into parameters_
    for (const auto& parameter : parameters) {
      if (const Parameter* tracked = lookup(parameter))
        stepped.insert(static_cast<size_t>(tracked - parameters_.data()));
    }
    std::vector<std::pair<Model*, Region*>> whole;
    for (auto& model : models_) {
      for (auto& region : model.regions) {
        bool all = true;
        for (size_t b : region.buckets) {
          for (size_t index : model.buckets[b].members) all = all && stepped.count(index) > 0;
        }
        if (!all || region.buckets.empty()) continue;
        whole.emplace_back(&model, &region);
        for (size_t b : region.buckets) {
          for (size_t index : model.buckets[b].members) stepped.erase(index);
        }
      }
    }
    std::vector<c10d_compat::WorkPtr> works;
    const auto each_member = [this](const Model& model, const Region& region, const auto& apply) {
      for (size_t b : region.buckets) {
        const Bucket& bucket = model.buckets[b];
        int64_t offset = 0;
        for (size_t index : bucket.members) {
          const at::Tensor& tensor = parameters_[index].tensor;
          apply(tensor, bucket.flat.narrow(0, offset, tensor.numel()));
          offset += tensor.numel();
        }
      }
    };
    for (auto [model, region] : whole) {
      ensure_memory(*model, *region);
      if (region->owner == context_.rank) {
        each_member(*model, *region,
                    [](const at::Tensor& tensor, at::Tensor part) { part.copy_(tensor.detach().reshape({-1})); });
      }
      std::vector<at::Tensor> tensors{region->memory};
      c10d::BroadcastOptions options;
      options.rootRank = region->owner;
      works.push_back(context_.group->broadcast(tensors, options));
    }
    const size_t cap = bucket_bytes(context_.options).second;
    for (int owner = 0; owner < context_.world_size; ++owner) {
      std::vector<at::Tensor> owned;
      for (const auto& parameter : parameters) {
        const Parameter* tracked = lookup(parameter);
        if (tracked == nullptr || tracked->owner != owner) continue;
        if (stepped.count(static_cast<size_t>(tracked - parameters_.data())) > 0) owned.push_back(parameter.detach());
      }
      if (!owned.empty()) c10d::broadcast_coalesced(context_.group, owned, cap, owner);
    }
    for (size_t w = 0; w < whole.size(); ++w) {
      works[w]->wait();
      const auto [model, region] = whole[w];
      if (region->owner == context_.rank) continue;
      each_member(*model, *region, [](const at::Tensor& tensor, const at::Tensor& part) {
        tensor.detach().copy_(part.view(tensor.sizes()));
      });
    }
  }

  void finish_reduction(Model& model) {
    if (!model.set_aside.empty()) {
      for (size_t k = 0; k < model.members.size(); ++k) {
        at::Tensor earlier = model.set_aside[k];
        if (!earlier.defined()) continue;
        auto& parameter = parameters_[model.members[k]];
        at::Tensor gradient = parameter.tensor.grad();
        if (gradient.defined()) earlier.add_(gradient);
        parameter.tensor.mutable_grad() = earlier;
      }
      model.set_aside.clear();
    }
    model.reduced = true;
  }

  // Steps the parameters this rank owns (the others have no gradient now).
  virtual void step_owned(torch::optim::Optimizer& optimizer) { optimizer.step(); }
  // Whether this rank updates parameters_[index] (holds its averaged
  // gradient and optimizer state): its owner (fsdp: a rank holding part
  // of its elements).
  virtual bool updates_here(size_t index) const { return parameters_[index].owner == context_.rank; }

  const int stage_;
  std::unique_ptr<DdpStrategy> all_reduce_;  // zero1
  GradientReadHint gradient_read_hint_;
  AccumulationHooks hooks_;  // zero2
  // zero2, this backward pass: its buckets as (model, bucket) in the order
  // their reduces start, and the next one to start.
  std::vector<std::pair<size_t, size_t>> sequence_;
  size_t next_in_sequence_ = 0;
  std::vector<Parameter> parameters_;
  std::unordered_map<const c10::TensorImpl*, size_t> index_;
  std::vector<Model> models_;
  std::vector<size_t> owned_bytes_;  // per rank

  // The optimizer states of the parameters `select` picks (by position in
  // `parameters`), serialized with their positions; empty when none.
  static std::string serialize_states(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& parameters,
                                      const std::function<bool(size_t)>& select) {
    torch::serialize::OutputArchive archive;
    c10::List<int64_t> positions;
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (!select(i)) continue;
      const auto found = optimizer.state().find(c10d_compat::optimizer_state_key(optimizer, parameters[i]));
      if (found == optimizer.state().end()) continue;
      torch::serialize::OutputArchive nested;
      found->second->serialize(nested);
      archive.write("p" + std::to_string(i), nested);
      positions.push_back(static_cast<int64_t>(i));
    }
    if (positions.empty()) return {};
    archive.write("positions", c10::IValue(positions));
    std::ostringstream bytes(std::ios::out | std::ios::binary);
    archive.save_to(bytes);
    return bytes.str();
  }
  // What serialize_states wrote: each position and its state's archive.
  std::vector<std::pair<int64_t, std::shared_ptr<torch::serialize::InputArchive>>> read_states(
      const std::string& bytes) const {
    std::vector<std::pair<int64_t, std::shared_ptr<torch::serialize::InputArchive>>> states;
    if (bytes.empty()) return states;
    torch::serialize::InputArchive archive;
    std::istringstream stream(bytes, std::ios::in | std::ios::binary);
    archive.load_from(stream, context_.device);
    c10::IValue positions;
    archive.read("positions", positions);
    for (const int64_t position : positions.toIntVector()) {
      auto nested = std::make_shared<torch::serialize::InputArchive>();
      archive.read("p" + std::to_string(position), *nested);
      states.emplace_back(position, std::move(nested));
    }
    return states;
  }

  // Every rank's `bytes` on `root` (empty elsewhere): sizes all-gathered,
  // then a c10d gather of the padded bytes.
  std::vector<std::string> gather_to(int root, const std::string& bytes) {
    const int world = context_.world_size;
    const auto on_device = at::TensorOptions().device(context_.device);
    std::vector<at::Tensor> size{at::full({1}, static_cast<int64_t>(bytes.size()), on_device.dtype(at::kLong))};
    std::vector<std::vector<at::Tensor>> sizes(1);
    for (int r = 0; r < world; ++r) sizes[0].push_back(at::empty_like(size[0]));
    context_.group->allgather(sizes, size)->wait();
    std::vector<int64_t> lengths;
    for (const auto& length : sizes[0]) lengths.push_back(length.item<int64_t>());
    const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
    std::vector<std::string> result(context_.rank == root ? static_cast<size_t>(world) : 0);
    if (longest == 0) return result;

    auto padded = at::zeros({longest}, at::TensorOptions().dtype(at::kByte));
    std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(padded.data_ptr<uint8_t>()));
    std::vector<at::Tensor> input{padded.to(context_.device)};
    std::vector<std::vector<at::Tensor>> outputs;
    if (context_.rank == root) {
      outputs.resize(1);
      for (int r = 0; r < world; ++r) outputs[0].push_back(at::empty_like(input[0]));
    }
    c10d::GatherOptions options;
    options.rootRank = root;
    context_.group->gather(outputs, input, options)->wait();
    for (int r = 0; context_.rank == root && r < world; ++r) {
      const auto received = outputs[0][static_cast<size_t>(r)].cpu();
      result[static_cast<size_t>(r)].assign(reinterpret_cast<const char*>(received.data_ptr<uint8_t>()),
                                            static_cast<size_t>(lengths[static_cast<size_t>(r)]));
    }
    return result;
  }
};

// "zero1" or "zero2" (`stage`).
std::unique_ptr<Strategy> make_zero_strategy(const StrategyContext& context, int stage);

}  // namespace detail
}  // namespace fabric
