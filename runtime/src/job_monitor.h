// Ranks that leave the training loop at different steps.
//
// A loop such as `if (loss < 1e-3) break;` on a loss each rank computed from
// its own shard stops at different steps on different ranks: one rank
// reaches the end of the job while another waits in a collective (the
// gradient all-reduce of the next backward) that the first will never join.
// Without help both wait until Options::timeout (30 min by default), or
// forever where one of them waits for its children in ~Fabric.
//
// The JobMonitor of every rank of a multi-process job:
//  - counts, on the main thread, the collectives this rank entered (every
//    rank runs the same ones in the same order while they agree) and its
//    steps (fabric.step and fabric.backward calls): a few relaxed atomic
//    stores per collective, nothing else per step;
//  - in ~Fabric publishes "finished after N steps, C collectives" in the
//    rendezvous store and waits there until every rank has finished, so that
//    no rank exits 0 while another one cannot finish;
//  - runs a watchdog thread with its own store connection (a TCPStore
//    client is not to be shared between threads). It stays off the network
//    while the main thread is outside collectives or in one for less than a
//    second; after that it looks, twice a second, whether a rank finished
//    with fewer collectives than the one this rank waits in. Such a rank can
//    never join it: the watchdog prints one message naming both ranks, their
//    step counts and the likely cause, and every rank of the job exits with
//    code 1 within seconds. A rank busy with local work (rank 0 evaluating
//    alone) while the others have finished is not in a collective and is
//    left alone.
// A rank that ends without destroying its Fabric (std::exit, a crash) is the
// launcher's to report (its exit code); it publishes nothing.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fabric {
namespace detail {

class JobMonitor {
 public:
  struct Config {
    int rank = 0;
    int world_size = 1;
    // A launcher (Fabric's re-exec, fabric-run) watches every rank's exit
    // and stops the job when one fails; otherwise (torchrun, SLURM, MPI
    // variables) ranks send heartbeats so that a rank waiting at the end
    // notices one that died.
    bool supervised = true;
  };

  // `store` is the main thread's connection, `watchdog_store` a second one
  // to the same store for the watchdog thread, which starts here.
  JobMonitor(Config config, c10::intrusive_ptr<c10d::Store> store,
             c10::intrusive_ptr<c10d::Store> watchdog_store);
  // Stops the watchdog thread.
  ~JobMonitor();
  JobMonitor(const JobMonitor&) = delete;
  JobMonitor& operator=(const JobMonitor&) = delete;

  // Main thread, around every collective (nested ones restore the outer one).
  struct Scope {
    int64_t collective = 0;  // 0: not in a collective
    const char* name = nullptr;
    int64_t entered_ns = 0;
  };
  Scope enter(const char* name) noexcept;
  void leave(const Scope& outer) noexcept;
  void count_step() noexcept { steps_.fetch_add(1, std::memory_order_relaxed); }
  void count_backward() noexcept { backwards_.fetch_add(1, std::memory_order_relaxed); }

  // ~Fabric, not unwinding: publishes that this rank finished and waits
  // until every rank has. Exits the process with code 1 when the job cannot
  // finish (another rank waits in a collective this one will not join, or
  // left without finishing).
  void finish();
  // ~Fabric while an exception unwinds, without a launcher watching: tells
  // ranks waiting in finish() that this rank will not finish.
  void abandon(const std::string& reason) noexcept;

 private:
  struct Finished {
    int rank;
    int64_t steps;
    int64_t backwards;
    int64_t collectives;
  };

  void watch();
  void poll_while_blocked(c10d::Store& store);
  [[noreturn]] void report_divergence(c10d::Store& store, const Scope& stuck,
                                      const std::vector<Finished>& finished);
  [[noreturn]] void stop_because_of_other_rank(c10d::Store& store, bool acknowledge);
  void send_heartbeat(c10d::Store& store);
  void stop_watchdog() noexcept;
  int64_t step_count() const noexcept;

  Config config_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Store> watchdog_store_;

  // Written by the main thread, read by the watchdog.
  int64_t collectives_ = 0;  // main thread only
  std::atomic<int64_t> current_{0};
  std::atomic<const char*> current_name_{nullptr};
  std::atomic<int64_t> entered_ns_{0};
  std::atomic<int64_t> steps_{0};
  std::atomic<int64_t> backwards_{0};

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point last_poll_{};
  std::chrono::steady_clock::time_point last_heartbeat_{};
  std::thread watchdog_;
};

} // namespace detail
} // namespace fabric
