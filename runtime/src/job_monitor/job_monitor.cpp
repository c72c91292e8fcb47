// See job_monitor.h.
#include "job_monitor/job_monitor.h"

#include "launchers/launcher.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

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
const std::string kStop = "fabric/job/stop";               // "<rank>\n<reason>"
const std::string kStopClaims = "fabric/job/stop_claims";  // first claimant sets kStop
const std::string kAcks = "fabric/job/stop_acks";          // ranks that read kStop
const std::string kExited = "fabric/job/exited";
// Set by rank 0 once it knows the job is being stopped: rank 0 of a job
// Fabric launched supervises the others, and reports a child that exits
// before it knows why.
const std::string kRankZeroStopping = "fabric/job/rank0_stopping";
constexpr auto kRankZeroWait = 2s;
// Bumped by every change of a "where" publication, so that a waiting rank
// reads the others' only when one changed.
const std::string kWhereVersion = "fabric/job/where_version";
std::string finished_key(int rank) { return "fabric/job/finished/" + std::to_string(rank); }
std::string alive_key(int rank) { return "fabric/job/alive/" + std::to_string(rank); }
// "<serial> <kind> <call> <collective> <steps> <backwards>\n<name>\n<detail>".
// Never deleted, only overwritten (kind 0: no longer waiting): a get() of a
// key that vanished after check() would block until the store's timeout.
std::string where_key(int rank) { return "fabric/job/where/" + std::to_string(rank); }

// Waiting in a collective for less than this is normal and never reaches
// the store; after it the watchdog publishes where it waits and looks at
// the others every kPollInterval.
constexpr auto kBlockedFor = 1s;
constexpr auto kPollInterval = 500ms;
constexpr auto kTick = 250ms;
// Another rank waiting under another collective number: a rank that has
// just left a collective may still be published there for a tick, so the
// sighting counts once it held this long. A rank that finished after
// entering as many collectives as this one waits in took part in it, or
// took part in another one under that number: this one would have its data
// by then.
constexpr auto kConfirmOtherNumber = 1s;
constexpr auto kConfirmFinishedPast = 2s;
// Once the ranks are known to be in different collectives, how long the
// reporter waits for ranks that have not said where they are (a waiting
// rank says so within kBlockedFor + kTick).
constexpr auto kGather = 2500ms;
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
// How long the rank that reports waits for the others to read why (rank 0
// serves the store: its exit would cut them off).
constexpr auto kAckWait = 3s;
// A failed collective whose story the watchdog could not tell (the store is
// gone) ends the process after this, with what this rank knows.
constexpr auto kFailureFallback = 12s;
// Distinct barrier names kept for messages.
constexpr size_t kMaxBarrierLabels = 64;
constexpr size_t kMaxBarrierNameInLabel = 60;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

std::string bytes_to_string(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }
std::vector<uint8_t> string_to_bytes(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }

std::string steps_text(int64_t steps) { return std::to_string(steps) + (steps == 1 ? " step" : " steps"); }

// What a rank calls its steps: fabric.step() calls, or fabric.backward()
// calls for a program that steps its optimizer itself.
int64_t steps_of(int64_t steps, int64_t backwards) { return steps > 0 ? steps : backwards; }

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// Gloo's size check, "... op.preamble.length <= op.nbytes. 8 vs 4", in words.
std::string describe_failure(const std::string& error) {
  const std::string check = "op.preamble.length <= op.nbytes. ";
  const auto at = error.find(check);
  if (at != std::string::npos) {
    std::istringstream numbers(error.substr(at + check.size()));
    int64_t arrived = 0;
    int64_t room = 0;
    std::string vs;
    if (numbers >> arrived >> vs >> room && vs == "vs") {
      return "Gloo received " + std::to_string(arrived) + " bytes from another rank for a receive of " +
             std::to_string(room) + " (" + first_line(error) + ")";
    }
  }
  return "Gloo failed: " + first_line(error);
}

const char kAdvice[] =
    "The likely cause is a condition that differs per rank, such as a training loop left "
    "(`if (loss < x) break;`) or a backward skipped (`if (std::isnan(loss)) continue;`) on a "
    "value each rank computed from its own data (its own loss or metric): all-reduce that value "
    "first (`value = fabric.all_reduce(value, fabric::ReduceOp::Mean);`) so that every rank "
    "takes the same path; fabricize reports such loops as fabric-divergent-exit.";

// The terminate handler's way to the monitor of this process (one Fabric
// of several processes at a time), and what to do for anything else.
std::mutex terminate_mutex;
std::atomic<JobMonitor*> terminate_monitor{nullptr};
std::terminate_handler previous_terminate = nullptr;

void on_terminate() {
  if (JobMonitor* monitor = terminate_monitor.load()) {
    std::string what;
    if (const auto error = std::current_exception()) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& exception) {
        what = exception.what();
      } catch (...) {
      }
    }
    // Gloo's thread found data of another size: the story, not an abort.
    if (JobMonitor::is_mismatch_error(what)) monitor->collective_failed(what);
  }
  std::terminate_handler previous;
  {
    std::lock_guard<std::mutex> lock(terminate_mutex);
    previous = previous_terminate;
  }
  if (previous != nullptr) previous();
  std::abort();
}

}  // namespace

bool JobMonitor::is_mismatch_error(const std::string& what) {
  return what.find("enforce fail at") != std::string::npos && what.find("gloo") != std::string::npos;
}

JobMonitor::JobMonitor(Config config, c10::intrusive_ptr<c10d::Store> store,
                       c10::intrusive_ptr<c10d::Store> watchdog_store)
    : config_(config), store_(std::move(store)), watchdog_store_(std::move(watchdog_store)) {
  watching_ = true;
  // The watchdog runs with every signal blocked, so that SIGINT/SIGTERM keep
  // going to the program's own threads.
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  watchdog_ = std::thread([this] { watch(); });
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  {
    std::lock_guard<std::mutex> lock(terminate_mutex);
    const std::terminate_handler replaced = std::set_terminate(on_terminate);
    if (replaced != on_terminate) previous_terminate = replaced;
  }
  terminate_monitor.store(this);
}

JobMonitor::~JobMonitor() { stop_watchdog(); }

void JobMonitor::stop_watchdog() noexcept {
  // From here on a Gloo failure is no longer this monitor's to tell (the
  // rank is finishing): the handler that was there before takes it.
  JobMonitor* self = this;
  terminate_monitor.compare_exchange_strong(self, nullptr);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    watching_ = false;
  }
  wake_.notify_all();
  if (watchdog_.joinable() && watchdog_.get_id() != std::this_thread::get_id()) watchdog_.join();
}

JobMonitor::Scope JobMonitor::enter(const char* name) noexcept {
  Scope outer{current_.load(std::memory_order_relaxed), current_call_.load(std::memory_order_relaxed),
              current_name_.load(std::memory_order_relaxed), entered_ns_.load(std::memory_order_relaxed)};
  const int64_t id = ++collectives_;
  const bool nested = outer.collective != 0;
  // Readers check current_ before and after reading the rest.
  current_.store(0, std::memory_order_release);
  // A nested collective keeps the number, name and start of the public call
  // that runs it (fabric.save(), not the broadcast inside it).
  current_call_.store(nested ? outer.call : id, std::memory_order_release);
  current_name_.store(nested ? outer.name : name, std::memory_order_release);
  entered_ns_.store(nested ? outer.entered_ns : now_ns(), std::memory_order_release);
  current_.store(id, std::memory_order_release);
  return outer;
}

void JobMonitor::leave(const Scope& outer) noexcept {
  current_.store(0, std::memory_order_release);
  current_call_.store(outer.call, std::memory_order_release);
  current_name_.store(outer.name, std::memory_order_release);
  entered_ns_.store(outer.entered_ns, std::memory_order_release);
  current_.store(outer.collective, std::memory_order_release);
}

const char* JobMonitor::label_for_barrier(const std::string& name) {
  auto found = barrier_labels_.find(name);
  if (found != barrier_labels_.end()) return found->second.c_str();
  if (barrier_labels_.size() >= kMaxBarrierLabels) return "fabric.barrier()";
  std::string shown = name.substr(0, kMaxBarrierNameInLabel);
  if (shown.size() < name.size()) shown += "...";
  return barrier_labels_.emplace(name, "fabric.barrier(\"" + shown + "\")").first->second.c_str();
}

int64_t JobMonitor::step_count() const noexcept {
  return steps_of(steps_.load(std::memory_order_relaxed), backwards_.load(std::memory_order_relaxed));
}

bool JobMonitor::snapshot(Snapshot& out) const noexcept {
  out.steps = steps_.load(std::memory_order_relaxed);
  out.backwards = backwards_.load(std::memory_order_relaxed);
  out.scope = Scope{};
  const int64_t id = current_.load(std::memory_order_acquire);
  if (id == 0) return false;
  Scope scope;
  scope.collective = id;
  scope.call = current_call_.load(std::memory_order_acquire);
  scope.name = current_name_.load(std::memory_order_acquire);
  scope.entered_ns = entered_ns_.load(std::memory_order_acquire);
  if (current_.load(std::memory_order_acquire) != id) return false;
  out.scope = scope;
  return true;
}

bool JobMonitor::collective_failed(const std::string& error) noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!watching_) return false;
    if (!failure_pending_) {
      failure_ = error;
      failure_pending_ = true;
    }
  }
  wake_.notify_all();
  // The watchdog ends the process (it may need a few seconds to hear from
  // the other ranks). Should it not, say what this rank knows.
  std::this_thread::sleep_for(kFailureFallback);
  write_stderr_line("fabric: rank " + std::to_string(config_.rank) +
                    ": the ranks are in different collectives: " + describe_failure(error) +
                    ". Where the other ranks are is unknown (the rendezvous store did not "
                    "answer). " +
                    kAdvice);
  abort_job("rank " + std::to_string(config_.rank) + " found the ranks in different collectives", 1);
}

void JobMonitor::stop_if_job_is_stopping() noexcept {
  try {
    if (store_->check({kStop})) stop_because_of_other_rank(*store_);
  } catch (const std::exception&) {
    // The store is gone with rank 0; the launcher or the error says why.
  }
}

void JobMonitor::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, kTick, [this] { return stopping_ || failure_pending_; });
    if (stopping_) break;
    const bool failed = failure_pending_;
    lock.unlock();
    try {
      if (!config_.supervised) send_heartbeat(*watchdog_store_);
      tick(*watchdog_store_);
    } catch (const std::exception& error) {
      // The store is unreachable (rank 0, which serves it, ended): the
      // collective this rank waits in fails as well, and the launcher or
      // Gloo says why. A collective that failed here is told now, with
      // what this rank knows.
      if (failed) {
        std::string failure;
        {
          std::lock_guard<std::mutex> guard(mutex_);
          failure = failure_;
        }
        stop_reporting_child_exits();
        write_stderr_line("fabric: rank " + std::to_string(config_.rank) +
                          ": the ranks are in different collectives: " + describe_failure(failure) +
                          ". Where the other ranks are is unknown (the rendezvous store did not "
                          "answer: " +
                          first_line(error.what()) + "). " + kAdvice);
        abort_job("rank " + std::to_string(config_.rank) + " found the ranks in different collectives", 1);
      }
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

void JobMonitor::publish(c10d::Store& store, Record::Kind kind, const Snapshot& me, const std::string& detail) {
  std::ostringstream record;
  record << ++serial_ << ' ' << static_cast<int>(kind) << ' ' << me.scope.call << ' ' << me.scope.collective << ' '
         << me.steps << ' ' << me.backwards << '\n'
         << (me.scope.name != nullptr ? me.scope.name : "") << '\n'
         << detail;
  store.set(where_key(config_.rank), string_to_bytes(record.str()));
  store.add(kWhereVersion, 1);
  published_call_ = kind == Record::kNone ? 0 : me.scope.call;
}

void JobMonitor::clear_publication(c10d::Store& store) { publish(store, Record::kNone, Snapshot{}, ""); }

std::vector<JobMonitor::Record> JobMonitor::read_records(c10d::Store& store) {
  std::vector<Record> records;
  for (int rank = 0; rank < config_.world_size; ++rank) {
    if (rank == config_.rank) continue;
    Record record;
    record.rank = rank;
    if (store.check({finished_key(rank)})) {
      std::istringstream fields(bytes_to_string(store.get(finished_key(rank))));
      record.kind = Record::kFinished;
      fields >> record.steps >> record.backwards >> record.collective;
    } else if (store.check({where_key(rank)})) {
      std::istringstream text(bytes_to_string(store.get(where_key(rank))));
      std::string header;
      std::getline(text, header);
      std::istringstream fields(header);
      int kind = 0;
      fields >> record.serial >> kind >> record.call >> record.collective >> record.steps >> record.backwards;
      record.kind =
          kind == Record::kWaiting || kind == Record::kFailed ? static_cast<Record::Kind>(kind) : Record::kNone;
      std::getline(text, record.name);
      std::getline(text, record.detail, '\0');
    }
    records.push_back(std::move(record));
  }
  return records;
}

void JobMonitor::tick(c10d::Store& store) {
  bool failed = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    failed = failure_pending_;
  }
  Snapshot me;
  const bool in_collective = snapshot(me);
  if (failed) report_paths(store, me, /*failed=*/true);

  const auto now = Clock::now();
  if (!in_collective || now_ns() - me.scope.entered_ns < std::chrono::nanoseconds(kBlockedFor).count()) {
    // Off the network again; a publication of a wait that ended is withdrawn.
    if (published_call_ != 0) clear_publication(store);
    sightings_.clear();
    watched_ = 0;
    return;
  }
  if (now - last_poll_ < kPollInterval) return;
  last_poll_ = now;

  if (published_call_ != me.scope.call) publish(store, Record::kWaiting, me, "");
  if (store.check({kStop})) stop_because_of_other_rank(store);
  if (watched_ != me.scope.collective) {
    sightings_.clear();
    watched_ = me.scope.collective;
  }
  // Read the others only when something changed, or to confirm a sighting.
  const int64_t version = store.add(kWhereVersion, 0);
  const int64_t finished = store.add(kFinishedCount, 0);
  if (version != seen_version_ || finished != seen_finished_ || !sightings_.empty()) {
    records_ = read_records(store);
    seen_version_ = version;
    seen_finished_ = finished;
  }

  // A rank that finished before entering the collective this one waits in
  // can never join it (its data would be on the way otherwise).
  std::vector<Record> gone;
  for (const auto& record : records_) {
    if (record.kind == Record::kFinished && record.collective < me.scope.collective) {
      gone.push_back(record);
    }
  }
  const bool diverging = !gone.empty() || diverged(me, false, records_);
  if (!diverging || current_.load(std::memory_order_acquire) != me.scope.collective) return;
  if (!gone.empty()) report_finished_early(store, me.scope, gone);
  report_paths(store, me, /*failed=*/false);
}

bool JobMonitor::diverged(const Snapshot& me, bool failed, const std::vector<Record>& records) {
  if (failed) return true;
  const auto now = Clock::now();
  const std::string my_name = me.scope.name != nullptr ? me.scope.name : "";
  // A rank not heard of (never blocked long enough to publish, or cut off
  // from the store with its host): a rank waiting under another number may
  // then have left this collective with its data and be waiting for data
  // that a broken link lost, which the collective's timeout reports as what
  // it is. Another number means different paths only when every rank is
  // accounted for.
  const bool someone_unheard =
      std::any_of(records.begin(), records.end(), [](const Record& r) { return r.kind == Record::kNone; });
  bool confirmed = false;
  for (const auto& record : records) {
    switch (record.kind) {
      case Record::kFailed:
        // Data of another size arrived there: different collectives.
        return true;
      case Record::kWaiting:
        if (record.call == me.scope.call) {
          // The same collective number in another call: the ranks took
          // different paths, whatever the timing.
          if (record.name != my_name) return true;
          sightings_.erase(record.rank);
          break;
        } else if (someone_unheard) {
          sightings_.erase(record.rank);
          break;
        } else {
          auto found = sightings_.find(record.rank);
          if (found == sightings_.end() || found->second.serial != record.serial) {
            sightings_[record.rank] = Sighting{record.serial, now};
          } else if (now - found->second.since >= kConfirmOtherNumber) {
            confirmed = true;
          }
        }
        break;
      case Record::kFinished:
        if (record.collective >= me.scope.collective) {
          auto found = sightings_.find(record.rank);
          if (found == sightings_.end() || found->second.serial != -1) {
            sightings_[record.rank] = Sighting{-1, now};
          } else if (now - found->second.since >= kConfirmFinishedPast) {
            confirmed = true;
          }
        }
        break;
      case Record::kNone:
        sightings_.erase(record.rank);
        break;
    }
  }
  return confirmed;
}

void JobMonitor::report_paths(c10d::Store& store, const Snapshot& me, bool failed) {
  std::string failure;
  if (failed) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      failure = failure_;
    }
    publish(store, Record::kFailed, me, failure);
  }
  // Wait (briefly) until every rank said where it is: a rank that waits
  // says so within a second; one that never does is busy elsewhere.
  auto records = read_records(store);
  const auto deadline = Clock::now() + kGather;
  const auto unknown = [](const std::vector<Record>& all) {
    return std::any_of(all.begin(), all.end(), [](const Record& record) { return record.kind == Record::kNone; });
  };
  while (unknown(records) && Clock::now() < deadline) {
    if (store.check({kStop})) stop_because_of_other_rank(store);
    std::this_thread::sleep_for(100ms);
    records = read_records(store);
  }

  Record mine;
  mine.kind = failed ? Record::kFailed : Record::kWaiting;
  mine.rank = config_.rank;
  mine.call = me.scope.call;
  mine.collective = me.scope.collective;
  mine.steps = me.steps;
  mine.backwards = me.backwards;
  mine.name = me.scope.name != nullptr ? me.scope.name : "";
  mine.detail = failure;
  records.push_back(mine);
  std::sort(records.begin(), records.end(), [](const Record& a, const Record& b) { return a.rank < b.rank; });

  std::string ranks;
  for (const auto& record : records) {
    if (!ranks.empty()) ranks += "; ";
    const std::string who = "rank " + std::to_string(record.rank);
    const std::string steps = steps_text(steps_of(record.steps, record.backwards));
    const std::string where = record.call != 0
                                  ? " in " + record.name + " (collective #" + std::to_string(record.call) + ")"
                                  : " between collectives";
    switch (record.kind) {
      case Record::kWaiting:
        ranks += who + " waits" + where + " after " + steps;
        break;
      case Record::kFailed:
        ranks += who + (record.call != 0 ? " is" : ",") + where + " after " + steps + ", where " +
                 describe_failure(record.detail);
        break;
      case Record::kFinished:
        ranks += who + " finished the job (its Fabric was destroyed) after " + steps;
        break;
      case Record::kNone:
        ranks += who +
                 " is not waiting in any collective (busy with work of its own, or it "
                 "passed a collective that did not match)";
        break;
    }
  }
  // A rank that changed its set of parameters that require grad while
  // another did not: that is the cause to name.
  const bool trained_set_changed = std::any_of(
      records.begin(), records.end(), [](const Record& record) { return record.name == kTrainedSetChangedCall; });
  const std::string advice = trained_set_changed
                                 ? std::string(
                                       "Some ranks changed which parameters require grad (requires_grad_), "
                                       "or replaced set-up parameters (torch::load, Module::load, ->to()), "
                                       "before this fabric.backward() and the others did not: every rank must "
                                       "freeze and unfreeze the same parameters, and load the same "
                                       "checkpoints, at the same step, since the gradient synchronization is "
                                       "rebuilt over them on every rank (a "
                                       "condition that differs per rank, such as its own loss or data, must be "
                                       "all-reduced first: `value = fabric.all_reduce(value, "
                                       "fabric::ReduceOp::Mean);`).")
                                 : std::string(kAdvice);
  const std::string message =
      "fabric: the ranks took different paths through the program and are in different "
      "collectives, which can never match: " +
      ranks + ". " + advice + " Stopping all ranks.";
  end_job(store, message, "found the ranks in different collectives", "the ranks are in different collectives");
}

void JobMonitor::report_finished_early(c10d::Store& store, const Scope& stuck, const std::vector<Record>& finished) {
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
             (i == 0 ? " finished the job after " : " after ") + steps_text(steps_of(other.steps, other.backwards));
    }
    who += " (their Fabrics were destroyed)";
  }
  const std::string message =
      "fabric: the ranks left the training loop at different steps: " + who + ", while " + me + ", in its step " +
      std::to_string(step_count() + 1) + ", waits in " + (stuck.name != nullptr ? stuck.name : "a collective") +
      " for " + (finished.size() == 1 ? "it" : "them") +
      " to join, which will never happen. The likely cause is a stop condition that differs "
      "per rank, such as `if (loss < x) break;` (or a backward skipped with `continue`) on a "
      "value each rank computed from its own data: all-reduce that value first (`value = fabric.all_reduce(value, "
      "fabric::ReduceOp::Mean);`) so that every rank stops at the same step; fabricize reports "
      "such loops as fabric-divergent-exit. Stopping all ranks.";
  end_job(store, message, "found that the ranks left the training loop at different steps",
          "the ranks left the training loop at different steps");
}

void JobMonitor::end_job(c10d::Store& store, const std::string& message, const std::string& reason,
                         const std::string& short_reason) {
  const std::string me = "rank " + std::to_string(config_.rank);
  if (ending_.load()) wait_for_exit_in_progress();
  // This process ends the job now: its children's exits are not failures
  // to report any more.
  stop_reporting_child_exits();
  // One rank prints the whole story; the others say one line each.
  if (store.add(kStopClaims, 1) != 1) {
    const auto deadline = Clock::now() + 2s;
    while (!store.check({kStop}) && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
    if (store.check({kStop})) stop_because_of_other_rank(store);
    write_stderr_line("fabric: " + me + ": stopping: " + short_reason + " (another rank's message says which)");
    abort_job(me + " " + reason, 1);
  }
  ending_.store(true);
  // The story first, then the others' "stopping because" lines.
  write_stderr_line(message);
  store.set(kStop, string_to_bytes(std::to_string(config_.rank) + "\n" + reason + " (see its message)"));
  if (config_.rank == 0) store.set(kRankZeroStopping, string_to_bytes("1"));
  try {
    // Every other rank reads why before this one goes (and, rank 0, takes
    // the store with it); a rank busy elsewhere is not waited for long.
    const auto deadline = Clock::now() + kAckWait;
    while (store.add(kAcks, 0) < config_.world_size - 1 && Clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
    }
  } catch (const std::exception&) {
    // Rank 0, which serves the store, is already gone.
  }
  abort_job(me + " " + reason, 1);
}

void JobMonitor::stop_because_of_other_rank(c10d::Store& store) {
  // The watchdog and the main thread (its collective failed when a rank
  // left) may both get here: one says it.
  if (ending_.exchange(true)) wait_for_exit_in_progress();
  const std::string value = bytes_to_string(store.get(kStop));
  const auto newline = value.find('\n');
  const std::string who = value.substr(0, newline);
  const std::string reason = newline == std::string::npos ? "stopped" : value.substr(newline + 1);
  // This process ends the job now: its children's exits are not failures
  // to report any more. Its line goes out first: once the others know it
  // read why (the ack), rank 0 may stop this process at any moment, and a
  // stop message from rank 0 is not reported by a process that is ending.
  stop_reporting_child_exits("fabric: rank " + std::to_string(config_.rank) + ": stopping because rank " + who + " " +
                             reason);
  if (config_.rank == 0) store.set(kRankZeroStopping, string_to_bytes("1"));
  store.add(kAcks, 1);
  if (config_.rank == 0) {
    // Rank 0 serves the store and may supervise the others: its exit stops
    // them. A rank that is still about to say its line (it found the same
    // divergence and lost the claim to report it) gets to say it first.
    const auto deadline = Clock::now() + kAckWait;
    while (store.add(kAcks, 0) < config_.world_size - 1 && Clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
    }
  }
  // Rank 0 (which may supervise this process) learns it first, so that it
  // does not report this exit as a failure of its own.
  try {
    const auto deadline = Clock::now() + kRankZeroWait;
    while (config_.rank != 0 && !store.check({kRankZeroStopping}) && Clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
    }
  } catch (const std::exception&) {
    // Rank 0 is gone already.
  }
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
      if (store.check({kStop})) stop_because_of_other_rank(store);
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
            write_stderr_line("fabric: " + me + " finished, but rank " + std::to_string(rank) +
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

}  // namespace detail
}  // namespace fabric
