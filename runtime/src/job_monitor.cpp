// See job_monitor.h.
#include "job_monitor.h"

#include "launcher.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <utility>

namespace fabric {
namespace detail {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Store keys. Every rank of the job uses the same store, and a job uses it
// once, so the keys need no job id.
const std::string kFinishedCount = "fabric/job/finished_count";
const std::string kStop = "fabric/job/stop";              // "<rank>\n<reason>"
const std::string kStopClaims = "fabric/job/stop_claims";  // first claimant sets kStop
const std::string kAcks = "fabric/job/stop_acks";          // finished ranks that read kStop
const std::string kExited = "fabric/job/exited";
std::string finished_key(int rank) { return "fabric/job/finished/" + std::to_string(rank); }
std::string alive_key(int rank) { return "fabric/job/alive/" + std::to_string(rank); }

// Waiting in a collective for less than this is normal and never reaches
// the store; after it the watchdog looks every kPollInterval.
constexpr auto kBlockedFor = 1s;
constexpr auto kPollInterval = 500ms;
constexpr auto kTick = 250ms;
// Unsupervised ranks (torchrun...): heartbeat period, and how long a rank
// waiting at the end lets another rank stay silent before giving up on it.
constexpr auto kHeartbeatInterval = 2s;
constexpr auto kSilentLimit = 30s;
// Test hook: a shorter silence limit (seconds), so that a test of a rank
// that dies while another waits at the end runs in seconds.
std::chrono::milliseconds silent_limit() {
  const char* text = std::getenv("FABRIC_TEST_SILENT_LIMIT_S");
  if (text == nullptr || *text == '\0') return kSilentLimit;
  return std::chrono::milliseconds(static_cast<int64_t>(std::atof(text) * 1000));
}
// How long the rank that reports a divergence waits for the finished ranks
// to read why (rank 0 serves the store: its exit would cut them off).
constexpr auto kAckWait = 3s;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

std::string bytes_to_string(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}
std::vector<uint8_t> string_to_bytes(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

std::string steps_text(int64_t steps) {
  return std::to_string(steps) + (steps == 1 ? " step" : " steps");
}

// What a rank calls its steps: fabric.step() calls, or fabric.backward()
// calls for a program that steps its optimizer itself.
int64_t steps_of(int64_t steps, int64_t backwards) { return steps > 0 ? steps : backwards; }

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

} // namespace

JobMonitor::JobMonitor(Config config, c10::intrusive_ptr<c10d::Store> store,
                       c10::intrusive_ptr<c10d::Store> watchdog_store)
    : config_(config), store_(std::move(store)), watchdog_store_(std::move(watchdog_store)) {
  // The watchdog runs with every signal blocked, so that SIGINT/SIGTERM keep
  // going to the program's own threads.
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  watchdog_ = std::thread([this] { watch(); });
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

JobMonitor::~JobMonitor() { stop_watchdog(); }

void JobMonitor::stop_watchdog() noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

JobMonitor::Scope JobMonitor::enter(const char* name) noexcept {
  Scope outer{current_.load(std::memory_order_relaxed),
              current_name_.load(std::memory_order_relaxed),
              entered_ns_.load(std::memory_order_relaxed)};
  const int64_t id = ++collectives_;
  // Readers check current_ before and after reading the rest.
  current_.store(0, std::memory_order_release);
  // A nested collective keeps the name and start of the public call that
  // runs it (fabric.save(), not the broadcast inside it).
  current_name_.store(outer.collective != 0 ? outer.name : name, std::memory_order_release);
  entered_ns_.store(outer.collective != 0 ? outer.entered_ns : now_ns(),
                    std::memory_order_release);
  current_.store(id, std::memory_order_release);
  return outer;
}

void JobMonitor::leave(const Scope& outer) noexcept {
  current_.store(0, std::memory_order_release);
  current_name_.store(outer.name, std::memory_order_release);
  entered_ns_.store(outer.entered_ns, std::memory_order_release);
  current_.store(outer.collective, std::memory_order_release);
}

int64_t JobMonitor::step_count() const noexcept {
  return steps_of(steps_.load(std::memory_order_relaxed),
                  backwards_.load(std::memory_order_relaxed));
}

void JobMonitor::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, kTick);
    if (stopping_) break;
    lock.unlock();
    try {
      if (!config_.supervised) send_heartbeat(*watchdog_store_);
      poll_while_blocked(*watchdog_store_);
    } catch (const std::exception&) {
      // The store is unreachable (rank 0, which serves it, ended): the
      // collective this rank waits in fails as well, and the launcher or
      // Gloo says why.
    }
    lock.lock();
  }
}

void JobMonitor::send_heartbeat(c10d::Store& store) {
  const auto now = Clock::now();
  if (now - last_heartbeat_ < kHeartbeatInterval) return;
  last_heartbeat_ = now;
  store.add(alive_key(config_.rank), 1);
}

void JobMonitor::poll_while_blocked(c10d::Store& store) {
  Scope stuck;
  stuck.collective = current_.load(std::memory_order_acquire);
  if (stuck.collective == 0) return;
  stuck.name = current_name_.load(std::memory_order_acquire);
  stuck.entered_ns = entered_ns_.load(std::memory_order_acquire);
  if (current_.load(std::memory_order_acquire) != stuck.collective) return;

  const auto now = Clock::now();
  if (now_ns() - stuck.entered_ns < std::chrono::nanoseconds(kBlockedFor).count()) return;
  if (now - last_poll_ < kPollInterval) return;
  last_poll_ = now;

  if (store.check({kStop})) stop_because_of_other_rank(store, /*acknowledge=*/false);
  if (store.add(kFinishedCount, 0) == 0) return;
  std::vector<Finished> gone;
  for (int rank = 0; rank < config_.world_size; ++rank) {
    if (rank == config_.rank || !store.check({finished_key(rank)})) continue;
    std::istringstream fields(bytes_to_string(store.get(finished_key(rank))));
    Finished finished{rank, 0, 0, 0};
    fields >> finished.steps >> finished.backwards >> finished.collectives;
    // A rank that finished after entering this collective took part in it
    // (its data is on the way); one that finished before never will.
    if (finished.collectives < stuck.collective) gone.push_back(finished);
  }
  if (gone.empty() || current_.load(std::memory_order_acquire) != stuck.collective) return;
  report_divergence(store, stuck, gone);
}

void JobMonitor::report_divergence(c10d::Store& store, const Scope& stuck,
                                   const std::vector<Finished>& finished) {
  const std::string me = "rank " + std::to_string(config_.rank);
  std::string who;
  if (finished.size() == 1) {
    const auto& other = finished.front();
    who = "rank " + std::to_string(other.rank) + " finished the job (its Fabric was destroyed) after " +
          steps_text(steps_of(other.steps, other.backwards));
  } else {
    for (size_t i = 0; i < finished.size(); ++i) {
      const auto& other = finished[i];
      who += (i == 0 ? "rank " : ", rank ") + std::to_string(other.rank) +
             (i == 0 ? " finished the job after " : " after ") +
             steps_text(steps_of(other.steps, other.backwards));
    }
    who += " (their Fabrics were destroyed)";
  }
  const std::string message =
      "fabric: the ranks left the training loop at different steps: " + who + ", while " + me +
      ", in its step " + std::to_string(step_count() + 1) + ", waits in " +
      (stuck.name != nullptr ? stuck.name : "a collective") + " for " +
      (finished.size() == 1 ? "it" : "them") +
      " to join, which will never happen. The likely cause is a stop condition that differs "
      "per rank, such as `if (loss < x) break;` on a value each rank computed from its own "
      "data: all-reduce that value first (`value = fabric.all_reduce(value, "
      "fabric::ReduceOp::Mean);`) so that every rank stops at the same step. Stopping all ranks.";
  const std::string reason = "found that the ranks left the training loop at different steps";
  stop_reporting_child_exits();
  // One rank prints the whole story; any other rank stuck the same way
  // says one line.
  if (store.add(kStopClaims, 1) == 1) {
    store.set(kStop, string_to_bytes(std::to_string(config_.rank) + "\n" + reason +
                                     " (see its message)"));
    write_stderr_line(message);
  } else {
    write_stderr_line("fabric: " + me +
                      ": stopping: the ranks left the training loop at different steps (another "
                      "rank's message says which)");
  }
  try {
    const int64_t waiting = store.add(kFinishedCount, 0);
    const auto deadline = Clock::now() + kAckWait;
    while (store.add(kAcks, 0) < waiting && Clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
    }
  } catch (const std::exception&) {
    // Rank 0, which serves the store, is already gone.
  }
  abort_job(me + " " + reason, 1);
}

void JobMonitor::stop_because_of_other_rank(c10d::Store& store, bool acknowledge) {
  const std::string value = bytes_to_string(store.get(kStop));
  const auto newline = value.find('\n');
  const std::string who = value.substr(0, newline);
  const std::string reason = newline == std::string::npos ? "stopped" : value.substr(newline + 1);
  // This process ends the job now: its children's exits are not failures
  // to report any more.
  stop_reporting_child_exits();
  if (acknowledge) store.add(kAcks, 1);
  write_stderr_line("fabric: rank " + std::to_string(config_.rank) + ": stopping because rank " +
                    who + " " + reason);
  abort_job("rank " + who + " " + reason, 1);
}

void JobMonitor::finish() {
  stop_watchdog();
  auto& store = *store_;
  const std::string me = "rank " + std::to_string(config_.rank);
  try {
    std::ostringstream record;
    record << steps_.load() << ' ' << backwards_.load() << ' ' << collectives_;
    store.set(finished_key(config_.rank), string_to_bytes(record.str()));
    store.add(kFinishedCount, 1);

    // Unsupervised: the last heartbeat count of every rank and when it changed.
    std::vector<int64_t> heartbeats(static_cast<size_t>(config_.world_size), -1);
    std::vector<Clock::time_point> heard(static_cast<size_t>(config_.world_size), Clock::now());
    auto last_heartbeat_check = Clock::now();
    const auto limit = silent_limit();
    for (;;) {
      if (store.check({kStop})) stop_because_of_other_rank(store, /*acknowledge=*/true);
      if (store.add(kFinishedCount, 0) >= config_.world_size) break;
      const auto now = Clock::now();
      if (!config_.supervised && now - last_heartbeat_check >= 1s) {
        last_heartbeat_check = now;
        for (int rank = 0; rank < config_.world_size; ++rank) {
          if (rank == config_.rank || store.check({finished_key(rank)})) continue;
          const int64_t beats = store.add(alive_key(rank), 0);
          auto& last = heartbeats[static_cast<size_t>(rank)];
          if (beats != last) {
            last = beats;
            heard[static_cast<size_t>(rank)] = now;
          } else if (now - heard[static_cast<size_t>(rank)] > limit) {
            write_stderr_line(
                "fabric: " + me + " finished, but rank " + std::to_string(rank) +
                " neither finished nor gave a sign of life for " +
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(limit).count()) +
                " s (it died, or its process is stopped); exiting");
            abort_job(me + " gave up waiting for rank " + std::to_string(rank), 1);
          }
        }
      }
      std::this_thread::sleep_for(50ms);
    }
    // Rank 0 serves the store: it stays until every rank has read the count.
    store.add(kExited, 1);
    if (config_.rank == 0) {
      const auto deadline = Clock::now() + 10s;
      while (store.add(kExited, 0) < config_.world_size && Clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
      }
    }
  } catch (const std::exception& error) {
    write_stderr_line("fabric: " + me +
                      ": lost the rendezvous store (served by rank 0) while waiting for the other "
                      "ranks to finish: " +
                      first_line(error.what()));
    abort_job(me + " lost the rendezvous store", 1);
  }
}

void JobMonitor::abandon(const std::string& reason) noexcept {
  stop_watchdog();
  try {
    if (store_->add(kStopClaims, 1) == 1) {
      store_->set(kStop, string_to_bytes(std::to_string(config_.rank) + "\n" + reason));
    }
  } catch (const std::exception&) {
    // Nobody left to tell.
  }
}

} // namespace detail
} // namespace fabric
