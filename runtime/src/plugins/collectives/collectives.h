// The collectives plugin (Lightning's TorchCollective): the process group,
// its TCPStore and the JobMonitor that watches the ranks, and every
// collective of the public API (all_reduce, all_gather with uneven first
// dimensions, broadcast of tensors and strings, named barriers, shard()'s
// broadcast of an index order). Owned by the strategy; the strategies'
// own communication runs through run(), so that a dead rank, a lost node
// or a timeout is said in words.
#pragma once

#include <fabric/types.h>

#include "job_monitor/job_monitor.h"
#include "plugins/collectives/rendezvous.h"
#include "plugins/environments/process_placement.h"
#include "launchers/launcher.h"
#include "utilities/c10d_compat.h"
#include "utilities/messages.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace fabric {
namespace detail {

// barrier(name) compares this many bytes of the names.
constexpr int64_t kBarrierNameBytes = 128;
// all_gather sends each rank's shape in a fixed-size header.
constexpr int64_t kMaxGatherDims = 16;

// Fabric's ReduceOp as c10d's.
c10d::ReduceOp to_c10d(ReduceOp op);

class Collectives {
 public:
  Collectives(ProcessPlacement placement, std::chrono::milliseconds timeout, torch::Device device);
  ~Collectives();
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;

  // Fabric::launch() with several processes: the store (rank 0 serves it;
  // port 0 picks a free one), the ranks this process starts
  // (`start_local_ranks`, called once the store exists on rank 0 and
  // before connecting elsewhere), the job's consistency check, the Gloo or
  // NCCL process group, the default generator's agreement and the
  // JobMonitor.
  void connect(bool starts_local_ranks);
  bool connected() const { return static_cast<bool>(group_); }
  void mark_launched() { launched_ = true; }
  bool launched() const { return launched_; }

  const ProcessPlacement& placement() const { return placement_; }
  const torch::Device& device() const { return device_; }
  const c10d_compat::ProcessGroupPtr& group() const { return group_; }
  JobMonitor* monitor() const { return monitor_.get(); }
  // ~Fabric: the monitor goes before the strategy's own state (Reducers,
  // fsdp's units); the group and the store with this object.
  void stop_monitor() { monitor_.reset(); }

  void require_launched(const char* what) const {
    if (!launched_ && placement_.world_size > 1) {
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
  MonitorScope scope(const char* what) const { return MonitorScope(monitor_.get(), what); }

  // Runs one collective. When it fails because another rank died, the
  // launcher knows the cause within moments and is already stopping this
  // process with a clear message; the collective's own error (a Gloo
  // "connection closed" trace) would only confuse, so it is swallowed then.
  // A timeout (a rank that is alive but does not join) is said in words.
  template <class Function>
  auto run(const char* what, Function&& function) -> decltype(function()) {
    MonitorScope monitor_scope(monitor_.get(), what);
    try {
      return function();
    } catch (const std::exception& error) {
      explain_failure(what, error.what());
      throw;
    }
  }

  at::Tensor all_reduce(const at::Tensor& tensor, ReduceOp op);
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor);
  at::Tensor broadcast(const at::Tensor& tensor, int src);
  std::string broadcast(const std::string& value, int src);
  // Fabric::shard's and Fabric::shuffle's collective: rank 0's `order` on
  // every rank. `call` ("fabric.shard()" or "fabric.shuffle()") names it in
  // the monitor and in the error every rank throws when the lengths differ.
  std::vector<int64_t> broadcast_order(std::vector<int64_t> order, const char* call);
  void barrier(const std::string& name);

 private:
  // connect()'s parts: the store (rank 0 serves it), the Gloo or NCCL
  // process group, the JobMonitor with a store connection of its own.
  void open_store();
  void make_process_group();
  void start_monitor(bool starts_local_ranks);
  std::chrono::milliseconds store_connect_deadline() const;
  // Throws the words for a failed collective, or returns (the caller then
  // rethrows the collective's own error), or does not return (the job is
  // ending for a reason another rank or the launcher says).
  void explain_failure(const char* what, const std::string& message);

  ProcessPlacement placement_;
  std::chrono::milliseconds timeout_;
  torch::Device device_;
  bool launched_ = false;
  JobLayout layout_;  // who is where, once connected
  c10::intrusive_ptr<c10d::Store> store_;
  c10d_compat::ProcessGroupPtr group_;
  // Several processes: catches ranks that left training at different steps.
  std::unique_ptr<JobMonitor> monitor_;
};

}  // namespace detail
}  // namespace fabric
