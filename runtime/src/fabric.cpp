#include <fabric/fabric.h>

#include "connector.h"
#include "data_sharding.h"
#include "launchers/launcher.h"
#include "set_up_models.h"
#include "strategies/strategy.h"
#include "utilities/messages.h"
#include "utilities/sync_check.h"

#include <cstdarg>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <thread>

namespace fabric {
namespace detail {

// What a Fabric keeps besides its strategy (which owns the process group,
// precision and checkpoint IO): the set-up models, the sync check, its
// counters. Only this file sees it.
class FabricState {
 public:
  Options options;
  int64_t log_calls = 0;
  int uncaught_exceptions_at_construction = std::uncaught_exceptions();
  std::unique_ptr<Strategy> strategy;

  Collectives& collectives() const { return strategy->collectives(); }
  const ProcessPlacement& placement() const { return strategy->collectives().placement(); }
  const torch::Device& device() const { return strategy->device(); }

  // Every set-up model and loose parameter set (set_up_models.h); made
  // right after the strategy, which it reaches through.
  std::unique_ptr<SetUpModels> models;

  // The sync check (sampled by default; FABRIC_CHECK_SYNC); null when off.
  std::unique_ptr<SyncCheck> sync_check;
  // Backward passes run by this process: a loader's ShardSampler reads it to
  // tell training loaders (padded shares) from evaluation ones (exact).
  std::shared_ptr<std::atomic<uint64_t>> backward_passes = std::make_shared<std::atomic<uint64_t>>(0);
  // Backward passes that all-reduced (or reduce-scattered) a model's
  // gradients; Fabric::gradient_synchronizations.
  uint64_t gradient_synchronizations = 0;
};

}  // namespace detail

Fabric::Fabric(Options options) : state_(std::make_unique<detail::FabricState>()) {
  auto& state = *state_;
  options.override_from_environment();
  state.options = options;
  // The connector resolves the options into the strategy and its plugins.
  state.strategy = detail::connect_strategy(options);
  state.models = std::make_unique<detail::SetUpModels>(*state.strategy);
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

void Fabric::setup_module(const std::shared_ptr<torch::nn::Module>& module) {
  TORCH_CHECK(module != nullptr, "fabric::setup: the model is empty");
  state_->models->setup(*module, module);
}

void Fabric::setup_module(torch::nn::Module& module) { state_->models->setup(module, nullptr); }

void Fabric::setup_optimizer(torch::optim::Optimizer& optimizer) {
  auto& state = *state_;
  state.collectives().require_launched("setup()");
  // An optimizer the strategy cannot run is refused before anything changes.
  state.strategy->setup_optimizer(optimizer);
  state.models->setup_optimizer_parameters(optimizer);
  const auto& groups = optimizer.param_groups();
  for (const auto& group : groups) {
    for (const auto& parameter : group.params()) {
      TORCH_CHECK(!parameter.defined() || parameter.device() == state.device(),
                  "fabric::setup: an optimizer parameter is on ", parameter.device(), " instead of ", state.device(),
                  " (it was moved after it was set up); move it back, or load values with "
                  "fabric.load()");
    }
  }
}

detail::BackwardPassCounter Fabric::backward_pass_counter() const { return state_->backward_passes; }

uint64_t Fabric::gradient_synchronizations() const { return state_->gradient_synchronizations; }

void Fabric::backward(const torch::Tensor& loss, const torch::Tensor& gradient, c10::optional<bool> retain_graph,
                      bool create_graph) {
  auto& state = *state_;
  const bool check_sync = state.sync_check && state.collectives().group() && state.sync_check->due_before_backward();
  state.models->follow(check_sync);
  state.strategy->check_in_sync("fabric.backward()");
  if (check_sync) check_sync_sampled(/*at_end=*/false);
  verify::record_loss(loss);
  state.strategy->backward(loss, state.models->in_backward(), {gradient, retain_graph, create_graph},
                           [&](bool synchronized) {
                             if (auto* monitor = state.collectives().monitor()) monitor->count_backward();
                             state.backward_passes->fetch_add(1);
                             if (synchronized && state.placement().world_size > 1)
                               watch_for_duplicate_data(loss, ++state.gradient_synchronizations);
                           });
}

void Fabric::step(torch::optim::Optimizer& optimizer) { step(optimizer, nullptr); }

torch::Tensor Fabric::step(torch::optim::Optimizer& optimizer, torch::optim::Optimizer::LossClosure closure) {
  auto& state = *state_;
  state.collectives().require_launched("step()");
  state.models->warn_if_not_set_up(optimizer);
  auto loss = state.collectives().run("fabric.step()", [&] { return state.strategy->step(optimizer, closure); });
  if (auto* monitor = state.collectives().monitor()) monitor->count_step();
  // Before the sync check, which ends the job when the ranks differ: the
  // record then shows the step where they did.
  verify::record_step(optimizer);
  if (state.sync_check && state.sync_check->mode() == detail::SyncCheckMode::every_step)
    check_sync_after_step(optimizer);
  return loss;
}

void Fabric::check_sync_after_step(torch::optim::Optimizer& optimizer) {
  auto& state = *state_;
  const std::vector<detail::SyncCheck::Parameter> parameters = state.models->parameters_to_check(&optimizer);
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
  const std::vector<detail::SyncCheck::Parameter> parameters = state.models->parameters_to_check(nullptr);
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

FILE* Fabric::rank_zero_popen(const char* command, const char* mode) const {
  return detail::open_rank_zero_popen(is_global_zero(), command, mode);
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
  if (state_->models->find(module) == nullptr) {
    throw std::logic_error(
        "fabric::no_backward_sync: the model was not set up; call fabric.setup(model, ...) "
        "first");
  }
  return state_.get();
}

NoBackwardSync::NoBackwardSync(detail::FabricState* state, const torch::nn::Module* module, bool enabled)
    : state_(state), module_(module), enabled_(enabled) {
  if (enabled_) ++state_->models->find(module_)->no_sync_depth;
}

NoBackwardSync::~NoBackwardSync() {
  // The model's entry is gone only if another model was set up at its
  // address while the guard lived.
  if (!enabled_) return;
  if (auto* model = state_->models->find(module_)) --model->no_sync_depth;
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
