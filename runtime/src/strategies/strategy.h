// How a Fabric spreads training over its processes. A Strategy owns the
// plugins it trains with (the connector, connector.cpp, chooses them): the
// collectives (process group, store, JobMonitor), the precision (casts,
// autocast, loss scaler) and the checkpoint IO; Fabric delegates to them
// through it. The strategy itself decides what happens to a set-up model's
// gradients around backward, how an optimizer steps, and how optimizer
// state is gathered for a checkpoint and spread again after loading one.
//
//   single_device  nothing to do (one process)
//   ddp            one c10d::Reducer per model: bucketed gradient all-reduce
//                  overlapped with backward (PyTorch's DDP)
//   fsdp           zero2 plus the parameters: a rank keeps only those it
//                  owns and gathers a unit's others around its use
//   zero1, zero2   ZeRO-style sharding: every trained parameter has one owner
//                  rank, which alone holds its optimizer state (and, zero2,
//                  its gradient after backward) and updates it; fabric.step()
//                  then broadcasts each parameter from its owner
//
// Each strategy has its file, named after it: single_device, ddp, zero
// (zero1 and zero2), fsdp; strategy_registry makes one by its name.
//
// Fabric (and Strategy::backward, for before/after_backward and agree_any)
// calls the collective hooks (setup_module, before/after_backward,
// agree_any, step, gather_optimizer_state) on every rank in the same order,
// inside Collectives::run.
#pragma once

#include "plugins/collectives/collectives.h"
#include "plugins/io/checkpoint_io.h"
#include "plugins/precision/precision.h"
#include "utilities/c10d_compat.h"

#include <fabric/options.h>

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace fabric {
namespace detail {

// What every strategy may read; filled by the connector (group at launch()).
struct StrategyContext {
  Options options;
  std::string strategy;                // resolved name: "ddp", "zero2", ...
  c10d_compat::ProcessGroupPtr group;  // null with one process
  int rank = 0;
  int world_size = 1;
  torch::Device device{torch::kCPU};
};

// The autograd nodes a backward will run: everything its loss reaches.
// Built by Strategy::backward when the strategy needs_reached_models() or
// the precision scales the loss.
struct BackwardGraph {
  std::unordered_set<const torch::autograd::Node*> nodes;
  static BackwardGraph of(const at::Tensor& loss);
  // Whether the backward reaches `parameter`, i.e. will accumulate a
  // gradient into it (its AccumulateGrad node is in the graph; a parameter
  // that no graph ever used has none yet).
  bool reaches(const at::Tensor& parameter) const {
    const auto accumulator = torch::autograd::impl::try_get_grad_accumulator(parameter);
    return accumulator && nodes.count(accumulator.get()) > 0;
  }
};

// A set-up model that a backward's graph reaches; `synchronized` is false
// under no_backward_sync (gradients then accumulate locally). `graph` is the
// backward's graph: read it in check_backward and before_backward; once
// backward has run, its nodes may be freed and their addresses reused.
struct ReachedModel {
  const torch::nn::Module* module;
  bool synchronized;
  const BackwardGraph* graph = nullptr;
};

// A set-up model as fabric.backward() hands it to the strategy: where it was
// set up (never dereferenced: a model held by value may be gone), the
// parameters kept at setup, and whether its gradients are synchronized
// (no no_backward_sync guard holds it).
struct SetUpModelInBackward {
  const torch::nn::Module* module;
  const NamedParameters* parameters;
  bool synchronized;
};

// loss.backward()'s own arguments.
struct BackwardArguments {
  at::Tensor gradient;
  c10::optional<bool> retain_graph;
  bool create_graph = false;
};

// The plugins a strategy trains with; the connector builds them.
struct StrategyPlugins {
  std::unique_ptr<Collectives> collectives;
  std::unique_ptr<Precision> precision;
  std::unique_ptr<CheckpointIO> checkpoint_io;
};

class Strategy {
 public:
  explicit Strategy(const StrategyContext& context) : context_(context) {}
  virtual ~Strategy() = default;
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  // The connector, once: the plugins this strategy owns from now on.
  void attach(StrategyPlugins plugins);
  Collectives& collectives() const { return *plugins_.collectives; }
  Precision& precision() const { return *plugins_.precision; }
  const CheckpointIO& checkpoint_io() const { return *plugins_.checkpoint_io; }
  const std::string& name() const { return context_.strategy; }
  const Options& options() const { return context_.options; }
  const torch::Device& device() const { return context_.device; }

  // Fabric::launch(): the launcher's part (this rank's standard output, the
  // channel to the rank that started it, the local ranks it starts, the
  // intra-op threads), then with several processes the collectives'
  // process group, which every strategy communicates on.
  void launch();
  // The process group this strategy communicates on from now on (also a
  // strategy that another one runs inside it: zero1's all-reduce).
  virtual void use_group(const c10d_compat::ProcessGroupPtr& group) { context_.group = group; }

  // Clips the gradients of `module` by total norm or elementwise
  // (Fabric::clip_gradients). Where gradients are sharded the total norm
  // combines the ranks' partial ones: a collective then.
  at::Tensor clip_gradients(torch::nn::Module& module, c10::optional<double> clip_val, c10::optional<double> max_norm,
                            double norm_type, bool error_if_nonfinite);

  // `module` is on its device with rank 0's values; `trained` are its
  // parameters that require grad, with their names. Called once per model.
  virtual void setup_module(const torch::nn::Module& module, const NamedParameters& trained) {
    (void)module;
    (void)trained;
  }
  // Throws std::invalid_argument for an optimizer the strategy cannot run.
  virtual void setup_optimizer(torch::optim::Optimizer& optimizer) { (void)optimizer; }
  // The parameters of the model set up at `module` that require grad are
  // now `trained` (the program froze or unfroze some since the strategy last
  // saw them: LoRA's phases). Called by fabric.backward() on every rank, at
  // the same backward, before check_backward; not a collective. Never
  // dereferences `module` (a model held by value may be gone).
  virtual void trained_parameters_changed(const torch::nn::Module* module, const NamedParameters& trained) {
    (void)module;
    (void)trained;
  }

  // Parameters of a set-up model got new storage after setup (torch::load,
  // Module::load, set_, Module::to), on every rank at the same backward;
  // their values are rank 0's already. By default the synchronization is
  // rebuilt as for a changed set.
  virtual void parameters_replaced(const torch::nn::Module* module, const NamedParameters& trained) {
    trained_parameters_changed(module, trained);
  }
  // Whether Fabric watches set-up parameters for new storage (fsdp moves
  // them between its own storages, and catches replaced ones itself).
  virtual bool follows_replaced_parameters() const { return true; }
  // fabric.backward(), on every rank: finds the set-up models the loss
  // reaches (in setup order), checks that they can be synchronized (outside
  // the collective: an error there involves no other rank), then runs the
  // backward in one collective between before_backward and after_backward,
  // with the precision's loss scaling around it. `after_pass` runs once the
  // gradients are reduced and before the loss scaler unscales them, given
  // whether any model's gradients were synchronized (the facade counts the
  // pass there).
  void backward(const at::Tensor& loss, const std::vector<SetUpModelInBackward>& set_up,
                const BackwardArguments& arguments, const std::function<void(bool)>& after_pass);
  // Whether backward() must find out which set-up models the loss reaches.
  virtual bool needs_reached_models() const { return false; }
  // Called before backward's collective: throws (std::runtime_error) when
  // this backward cannot be synchronized, before any rank communicates.
  virtual void check_backward(const std::vector<ReachedModel>& models) const { (void)models; }
  // Around loss.backward(), in one collective.
  virtual void before_backward(const std::vector<ReachedModel>& models, const at::Tensor& loss) {
    (void)models;
    (void)loss;
  }
  virtual void after_backward(const std::vector<ReachedModel>& models) { (void)models; }

  // Whether a model's gradients after backward are partial per rank (each
  // rank holds only its own parameters'); clip_gradients then combines the
  // ranks' partial norms.
  virtual bool shards_gradients() const { return false; }
  // True on every rank if `value` is true on any rank (a collective where
  // gradients are sharded; with replicated gradients every rank already
  // computed the same value).
  virtual bool agree_any(bool value) { return value; }

  // optimizer.step(closure); the sharded strategies step only the owned
  // parameters and broadcast them afterwards.
  virtual at::Tensor step(torch::optim::Optimizer& optimizer, const torch::optim::Optimizer::LossClosure& closure) {
    return optimizer.step(closure);
  }
  // Throws std::logic_error, naming `call`, when a set-up model was changed
  // behind the strategy's back (sharded: optimizer.step() instead of
  // fabric.step(optimizer)).
  virtual void check_in_sync(const char* call) { (void)call; }
  // A set-up model's values were overwritten from a checkpoint.
  virtual void module_loaded(const torch::nn::Module& module) { (void)module; }
  // The model set up at `module` is gone (a model held by value was
  // destroyed and another one is set up at its address): nothing may be
  // looked up by that address any more. Never dereferences it.
  virtual void forget_module(const torch::nn::Module* module) { (void)module; }

  // Collective. Afterwards rank 0's `optimizer` holds the whole state (the
  // format a ddp checkpoint has); the returned function undoes that (call
  // it on every rank; it may be empty).
  virtual std::function<void()> gather_optimizer_state(torch::optim::Optimizer& optimizer) {
    (void)optimizer;
    return {};
  }
  // `optimizer` was loaded with the whole state: drop what this rank does
  // not own.
  virtual void optimizer_loaded(torch::optim::Optimizer& optimizer) { (void)optimizer; }

  // The rank whose part of a sharded checkpoint holds `parameter` (fsdp),
  // or -1 when every rank holds it whole.
  virtual int owner_of(const at::Tensor& parameter) const {
    (void)parameter;
    return -1;
  }
  // Collective, around a sharded checkpoint's write: each rank holds whole
  // the parameters it owns (owner_of) and, in `optimizers`, their whole
  // state (fsdp keeps pieces of both between steps); the returned function
  // undoes that (call it on every rank; it may be empty).
  virtual std::function<void()> hold_owned_state(const std::vector<torch::optim::Optimizer*>& optimizers) {
    (void)optimizers;
    return {};
  }
  // Collective. Makes every set-up parameter's memory whole on this rank
  // (fsdp releases what other ranks own) for code that reads it without
  // operators (a checkpoint's writer, a broadcast); the returned function
  // undoes that (call it on every rank; it may be empty).
  virtual std::function<void()> make_parameters_readable() { return {}; }
  // Collective, in ~Fabric once every rank got there: the set-up models are
  // left whole for code that uses them after the Fabric.
  virtual void before_shutdown() {}

 private:
  // Connects the collectives, then tells the strategy.
  void setup_environment(bool starts_local_ranks);
  // Several ranks, and a loss that reaches no set-up model: rank 0 says once
  // that nothing is synchronized.
  void warn_backward_without_set_up_model(bool none_set_up);
  bool warned_backward_without_set_up_model_ = false;
  // Declared before the context: destroyed after it, so the context's
  // reference to the group goes first and the collectives then release the
  // group before the store.
  StrategyPlugins plugins_;

 protected:
  StrategyContext context_;
};

}  // namespace detail
}  // namespace fabric
