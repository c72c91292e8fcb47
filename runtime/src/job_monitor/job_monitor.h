// Ranks that take different paths through the program.
//
// A loop such as `if (loss < 1e-3) break;` on a loss each rank computed from
// its own shard stops at different steps on different ranks; an
// `if (isnan(loss)) continue;` skips a backward on one rank only. Either way
// the ranks stop calling the same collectives in the same order:
//  - one rank reaches the end of the job while another waits in a
//    collective (the gradient all-reduce of the next backward) that the
//    first will never join;
//  - or both still run, each in a different collective: rank 0 in the
//    gradient all-reduce of fabric.backward(), rank 1 in the
//    fabric.all_reduce(double) after its loop. Gloo pairs the two by
//    sequence number; when the sizes differ it kills the process from its
//    own thread ("terminate called after throwing an instance of
//    'gloo::EnforceNotMet' ... op.preamble.length <= op.nbytes. 8 vs 4"), or
//    both wait forever (a barrier against a backward).
// Without help, a job ends with an abort trace nobody can act on, or waits
// until Options::timeout (30 min by default).
//
// The JobMonitor of every rank of a multi-process job:
//  - counts, on the main thread, the collectives this rank entered (every
//    rank runs the same ones in the same order while they agree), notes
//    which public call (fabric.backward(), fabric.barrier("name"), ...)
//    it is in, and counts its steps (fabric.step and fabric.backward calls):
//    a few relaxed atomic stores per collective, nothing else per step;
//  - in ~Fabric publishes "finished after N steps, C collectives" in the
//    rendezvous store and waits there until every rank has finished, so that
//    no rank exits 0 while another one cannot finish;
//  - runs a watchdog thread with its own store connection (a TCPStore
//    client is not to be shared between threads). It stays off the network
//    while the main thread is outside collectives or in one for less than a
//    second. After that it publishes "rank r waits in <call>, collective
//    #k, after s steps" (once per such wait) and looks, twice a second, at
//    what the other ranks published: a rank that finished before entering
//    collective #k, a rank waiting in another call under the same number, a
//    rank waiting under another number (confirmed a second later), or a
//    rank whose collective failed because another one sent data of a
//    different size. Each of these means that the ranks are in different
//    collectives, which can never match: one rank prints one message naming
//    every rank, the call it is in, its step count and the likely cause, and
//    every rank of the job exits with code 1 within seconds;
//  - installs a std::terminate handler: Gloo's own threads throw
//    gloo::EnforceNotMet when the data that arrives does not fit the
//    collective this rank is in. The handler hands that to the watchdog
//    (which publishes it and tells the story above) instead of aborting.
// A rank busy with local work (rank 0 evaluating alone) is not in a
// collective and is left alone. A rank that ends without destroying its
// Fabric (std::exit, a crash) is the launcher's to report (its exit code).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fabric {
namespace detail {

// The call in which fabric.backward() makes the ranks agree on a changed set
// of parameters that require grad (a rank waiting there while another one
// is elsewhere changed the set alone: the report says so).
constexpr const char* kTrainedSetChangedCall =
    "fabric.backward() (set-up parameters changed: which require grad, or replaced)";

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
  JobMonitor(Config config, c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::Store> watchdog_store);
  // Stops the watchdog thread.
  ~JobMonitor();
  JobMonitor(const JobMonitor&) = delete;
  JobMonitor& operator=(const JobMonitor&) = delete;

  // Main thread, around every collective (nested ones restore the outer one).
  struct Scope {
    int64_t collective = 0;  // 0: not in a collective
    int64_t call = 0;        // the outermost collective: the public call
    const char* name = nullptr;
    int64_t entered_ns = 0;
  };
  // `name` must outlive the job (a literal, or label_for_barrier's result).
  Scope enter(const char* name) noexcept;
  void leave(const Scope& outer) noexcept;
  void count_step() noexcept { steps_.fetch_add(1, std::memory_order_relaxed); }
  void count_backward() noexcept { backwards_.fetch_add(1, std::memory_order_relaxed); }
  // `fabric.barrier("<name>")`, kept for the rest of the job (a few dozen
  // distinct names at most; beyond that a generic label).
  const char* label_for_barrier(const std::string& name);

  // ~Fabric, not unwinding: publishes that this rank finished and waits
  // until every rank has. Exits the process with code 1 when the job cannot
  // finish (another rank waits in a collective this one will not join, or
  // left without finishing).
  void finish();
  // ~Fabric while an exception unwinds, without a launcher watching: tells
  // ranks waiting in finish() that this rank will not finish.
  void abandon(const std::string& reason) noexcept;

  // Any thread: the collective this rank is in failed with `error` because
  // another rank is in a different one (Gloo received data of another
  // size). The watchdog finds out where the other ranks are, one rank tells
  // the story, and the job ends; this call does not return then. Returns
  // false, at once, when the watchdog no longer runs (the Fabric is
  // finishing).
  bool collective_failed(const std::string& error) noexcept;
  // Main thread, after a collective threw: if another rank is already
  // ending the job (it found the ranks in different collectives), says so
  // and exits with code 1 instead of letting the collective's error (a
  // closed connection) reach the program.
  void stop_if_job_is_stopping() noexcept;

  // gloo::EnforceNotMet and its text: data of another size arrived.
  static bool is_mismatch_error(const std::string& what);

 private:
  // What a rank published about itself.
  struct Record {
    enum Kind { kNone, kWaiting, kFailed, kFinished };
    Kind kind = kNone;
    int rank = 0;
    int64_t serial = 0;      // waiting/failed: the rank's publication count
    int64_t call = 0;        // waiting/failed: the public call's collective number
    int64_t collective = 0;  // waiting/failed: innermost number; finished: total count
    int64_t steps = 0;
    int64_t backwards = 0;
    std::string name;    // the public call
    std::string detail;  // failed: the collective's error
  };
  // This rank, as the main thread left it.
  struct Snapshot {
    Scope scope;
    int64_t steps = 0;
    int64_t backwards = 0;
  };

  void watch();
  void tick(c10d::Store& store);
  bool snapshot(Snapshot& out) const noexcept;
  void publish(c10d::Store& store, Record::Kind kind, const Snapshot& me, const std::string& detail);
  void clear_publication(c10d::Store& store);
  std::vector<Record> read_records(c10d::Store& store);
  // Whether the ranks are in collectives that can never match, from this
  // rank's point of view (waiting in, or failed in, `me`).
  bool diverged(const Snapshot& me, bool failed, const std::vector<Record>& records);
  [[noreturn]] void report_paths(c10d::Store& store, const Snapshot& me, bool failed);
  [[noreturn]] void report_finished_early(c10d::Store& store, const Scope& stuck, const std::vector<Record>& finished);
  [[noreturn]] void end_job(c10d::Store& store, const std::string& message, const std::string& reason,
                            const std::string& short_reason);
  [[noreturn]] void stop_because_of_other_rank(c10d::Store& store);
  void send_heartbeat(c10d::Store& store);
  void stop_watchdog() noexcept;
  int64_t step_count() const noexcept;

  Config config_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Store> watchdog_store_;

  // Written by the main thread, read by the watchdog.
  int64_t collectives_ = 0;  // main thread only
  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> current_call_{0};
  std::atomic<const char*> current_name_{nullptr};
  std::atomic<int64_t> entered_ns_{0};
  std::atomic<int64_t> steps_{0};
  std::atomic<int64_t> backwards_{0};
  // This process is ending the job (one thread says why).
  std::atomic<bool> ending_{false};
  std::map<std::string, std::string> barrier_labels_;  // main thread only; nodes never move

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool watching_ = false;  // the watchdog runs and can take a failure
  std::string failure_;    // set by collective_failed
  bool failure_pending_ = false;

  // Watchdog thread only.
  std::chrono::steady_clock::time_point last_poll_{};
  std::chrono::steady_clock::time_point last_heartbeat_{};
  int64_t published_call_ = 0;  // the collective number of this rank's publication
  int64_t serial_ = 0;
  int64_t seen_version_ = -1;  // of the publications, at the last read
  int64_t seen_finished_ = 0;
  std::vector<Record> records_;  // the last read
  // Another rank seen waiting under another collective number (or finished
  // past this one): since when, while this rank waited in `watched_`.
  struct Sighting {
    int64_t serial;
    std::chrono::steady_clock::time_point since;
  };
  std::map<int, Sighting> sightings_;
  int64_t watched_ = 0;
  std::thread watchdog_;
};

}  // namespace detail
}  // namespace fabric
