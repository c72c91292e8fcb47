// The state behind fabric::Fabric, shared by the files that implement its
// parts (fabric.cpp: the object's orchestration; accelerator, precision,
// collectives, checkpoint_io, training_utilities): each reads and writes the
// fields it owns. Internal: not installed.
#pragma once

#include <fabric/fabric.h>

#include "c10d_compat.h"
#include "checkpoint_load.h"
#include "job_monitor.h"
#include "launcher.h"
#include "rendezvous.h"
#include "strategy.h"
#include "sync_check.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

namespace fabric {
namespace detail {

// PyTorch DDP's defaults.
constexpr size_t kMiB = 1024 * 1024;
constexpr size_t kBroadcastBucketBytes = 250 * kMiB;
// barrier(name) compares this many bytes of the names.
constexpr int64_t kBarrierNameBytes = 128;
// all_gather sends each rank's shape in a fixed-size header.
constexpr int64_t kMaxGatherDims = 16;

class FabricState {
 public:
  Options options;
  ProcessPlacement placement;
  JobLayout layout;  // who is where, once launched
  torch::Device device{torch::kCPU};
  bool launched = false;
  int64_t log_calls = 0;
  int uncaught_exceptions_at_construction = std::uncaught_exceptions();

  c10::intrusive_ptr<c10d::Store> store;
  c10d_compat::ProcessGroupPtr group;
  // What the strategy sees (its name resolved: "ddp", "single_device",
  // "zero1", "zero2"), and the strategy.
  StrategyContext context;
  std::unique_ptr<Strategy> strategy;
  // Every set-up model. A model held by value is not owned (`owner` is
  // null) and may be destroyed before the Fabric, so nothing after setup
  // dereferences `address`: backward, the sync check and the warnings use
  // the parameter tensors kept here (the same tensors the model holds).
  // An optimizer's parameters that no set-up model owned when
  // setup_optimizer saw them are one more entry (`loose`): `owner` is a
  // module of Fabric's own that holds those tensors (fabric.cpp,
  // LooseParameters), so the strategies, backward, the loss scaler and the
  // sync check treat them as a model.
  struct SetUpModel {
    const torch::nn::Module* address = nullptr;
    std::shared_ptr<torch::nn::Module> owner;
    bool loose = false;
    NamedParameters parameters;
    // Per parameter: whether it required grad when the strategy last set up
    // the model's gradient synchronization (setup(), or a backward that
    // found the set changed: see Fabric::backward).
    std::vector<char> trained;
    int no_sync_depth = 0;  // how many no_backward_sync guards hold it
  };
  std::vector<SetUpModel> models;
  SetUpModel* find_model(const torch::nn::Module* address) {
    for (auto& model : models) {
      if (model.address == address) return &model;
    }
    return nullptr;
  }

  // Several processes: catches ranks that left training at different steps.
  std::unique_ptr<JobMonitor> monitor;
  // FABRIC_CHECK_SYNC=1.
  std::unique_ptr<SyncCheck> sync_check;
  // Optimizers seen to step a set-up model's parameters (never dereferenced).
  std::unordered_set<const torch::optim::Optimizer*> optimizers_known_set_up;
  bool warned_backward_without_setup = false;
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

  // "16-mixed": PyTorch's GradScaler, in plain tensor ops (1.13 has no CPU
  // kernels for _amp_foreach_non_finite_check_and_unscale_/_amp_update_scale_).
  struct LossScaler {
    bool active = false;
    double scale = 1.0;
    int64_t growth_tracker = 0;  // clean steps since the last change
    Options::GradScalerOptions options;
  } scaler;

  // Runs one collective. When it fails because another rank died, the
  // launcher knows the cause within moments and is already stopping this
  // process with a clear message; the collective's own error (a Gloo
  // "connection closed" trace) would only confuse, so it is swallowed then.
  // A timeout (a rank that is alive but does not join) is said in words.
  template <class Function>
  auto collective(const char* what, Function&& function) -> decltype(function()) {
    MonitorScope scope(monitor.get(), what);
    try {
      return function();
    } catch (const std::exception& error) {
      const std::string message = error.what();
      if (monitor) {
        // Gloo found data of another size: the ranks are in different
        // collectives. The monitor finds out where each one is, says so and
        // ends the job (this call does not return then).
        if (JobMonitor::is_mismatch_error(message)) monitor->collective_failed(message);
        // Another rank is ending the job for that reason (its exit closed
        // this collective's connections): its message, not this error.
        monitor->stop_if_job_is_stopping();
      }
      const bool timed_out =
          message.find("Timed out") != std::string::npos || message.find("timed out") != std::string::npos;
      // A rank that died makes the collective fail at once (connection
      // closed), and the launcher's message follows within moments; a
      // timeout has waited long enough already.
      const auto patience = timed_out ? std::chrono::milliseconds(0) : std::chrono::seconds(3);
      if (wait_for_known_failure(patience)) wait_for_exit_in_progress();
      const std::string error_line = first_line_of(message);
      if (timed_out) {
        throw std::runtime_error(std::string("fabric: ") + what + " on rank " + std::to_string(placement.global_rank) +
                                 " timed out after " + std::to_string(options.timeout().count()) +
                                 " ms (Options::timeout): another rank did not join it in time; it is stuck, far "
                                 "slower, or on a different code path" +
                                 (placement.num_nodes > 1
                                      ? ", or the network between the nodes failed (ranks on other nodes: " +
                                            layout.describe_other_nodes(placement.node_rank) + ")"
                                      : std::string()) +
                                 ". Collective error: " + error_line);
      }
      // A whole node gone (killed, out of memory, powered off): no launcher
      // here saw its ranks end, so say which node this rank lost.
      if (placement.num_nodes > 1) {
        const std::string lost = describe_lost_peer(layout, placement, message);
        if (!lost.empty()) {
          throw std::runtime_error(std::string("fabric: ") + what + " on rank " +
                                   std::to_string(placement.global_rank) + " (node " +
                                   std::to_string(placement.node_rank) + ") failed: " + lost +
                                   ". Its processes ended (killed, out of memory, a crash, the machine went down) or "
                                   "the network to it failed; the job cannot go on: restart it on every node (from "
                                   "the last checkpoint). Collective error: " +
                                   error_line);
        }
      }
      throw;
    }
  }
  template <class Function>
  auto collective(Function&& function) -> decltype(function()) {
    return collective("a collective", std::forward<Function>(function));
  }

  void require_launched(const char* what) const {
    if (!launched && placement.world_size > 1) {
      throw std::logic_error(std::string("fabric: call launch() before ") + what);
    }
  }

  // Marks the main thread as inside a collective (or a public call made of
  // several) for the JobMonitor; nested scopes keep the outer call's name.
  class MonitorScope {
   public:
    MonitorScope(JobMonitor* monitor, const char* what) : monitor_(monitor) {
      if (monitor_ != nullptr) outer_ = monitor_->enter(what);
    }
    ~MonitorScope() {
      if (monitor_ != nullptr) monitor_->leave(outer_);
    }
    MonitorScope(const MonitorScope&) = delete;
    MonitorScope& operator=(const MonitorScope&) = delete;

   private:
    JobMonitor* monitor_;
    JobMonitor::Scope outer_;
  };
};

// Files (checkpoint_io.cpp).
std::string temporary_path_for(const std::string& path);
void verify_checkpoint_checksums(const std::string& path);
void write_file_atomically(const std::string& path, const std::string& bytes);

// The loss scaler of "16-mixed", from the options (precision.cpp).
void start_loss_scaler(FabricState::LossScaler& scaler, const Options& options);

// Fabric's ReduceOp as c10d's (collectives.cpp).
c10d::ReduceOp to_c10d(ReduceOp op);

// At launch() of a job of several ranks: every rank whose program has not
// seeded LibTorch's default generator (torch::manual_seed, seed_everything)
// takes rank 0's seed through the store, so unseeded programs draw the same
// numbers on every rank; a rank that drew from it unseeded before launch()
// is noted on stderr by rank 0 (training_utilities.cpp).
void agree_on_default_generator(c10d::Store& store, int rank, std::chrono::milliseconds timeout);

}  // namespace detail
}  // namespace fabric
