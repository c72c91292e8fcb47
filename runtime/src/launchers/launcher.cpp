#include "launchers/launcher.h"
#include "launchers/output_relay.h"
#include "utilities/environment_variables.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

extern char** environ;

namespace fabric {
namespace detail {
namespace {

// Names the child's end of its socketpair with rank 0.
constexpr const char* kChannelVariable = kLauncherChannelVariable;
// Names the descriptor that holds the launcher's standard output in a rank
// other than 0, whose fd 1 is /dev/null until it reaches fabric.launch().
constexpr const char* kStdoutVariable = "FABRIC_LAUNCHER_STDOUT_FD";
// Set when that output is relayed (output_relay.h) to a terminal: the rank
// line-buffers it, as it would write to the terminal itself.
constexpr const char* kStdoutTerminalVariable = "FABRIC_LAUNCHER_STDOUT_TERMINAL";
// Sent by a child once it has joined the process group.
constexpr char kJoinedByte = 'J';

}  // namespace

namespace {

// Before _exit(): keep what the program already printed. Only if nobody holds
// stdout, since the thread that does may be blocked for good.
void flush_stdout_if_free() {
  if (ftrylockfile(stdout) == 0) {
    fflush_unlocked(stdout);
    funlockfile(stdout);
  }
}

std::string describe_exit(int rank, pid_t pid, const siginfo_t& info, bool status_known) {
  std::string text = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
  if (!status_known) return text + " ended with an unknown status";
  if (info.si_code == CLD_EXITED) return text + " exited with code " + std::to_string(info.si_status);
  const char* name = strsignal(info.si_status);
  return text + " was killed by signal " + std::to_string(info.si_status) +
         (name != nullptr ? " (" + std::string(name) + ")" : std::string());
}

// Helper threads run with all signals blocked, so that SIGINT/SIGTERM keep
// going to the program's own threads.
template <class Function>
std::thread start_thread_with_signals_blocked(Function&& function) {
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  std::thread thread(std::forward<Function>(function));
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return thread;
}

std::vector<std::string> own_command_line() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::vector<std::string> arguments;
  std::size_t start = 0;
  while (start < all.size()) {
    const std::size_t end = all.find('\0', start);
    arguments.push_back(all.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (arguments.empty()) throw std::runtime_error("fabric: cannot read /proc/self/cmdline");
  return arguments;
}

struct Child {
  int global_rank = 0;
  pid_t pid = -1;
  int channel = -1;   // rank 0's end of the socketpair
  OutputRelay relay;  // its output, each line prefixed with its rank (not rank 0's)
  bool exited = false;
  std::thread watcher;
};

// Process-wide launch state. Deliberately leaked: watcher threads may still
// run while static destructors do, and must never see a destroyed object.
class LaunchState {
 public:
  static LaunchState& instance() {
    static LaunchState* state = new LaunchState();
    return *state;
  }

  // ---- rank 0 (or fabric-run) ----
  // Starts local ranks first_local_rank..local_world_size-1 of `self`'s node
  // running `executable` with `arguments` (argv, argv[0] included).
  void start_children(const ProcessPlacement& self, int first_local_rank, const std::string& executable,
                      const std::vector<std::string>& arguments, const std::vector<std::string>& extra_environment) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // A one-process job never joins a process group, so a clean exit is
      // all it can report.
      require_join_ = self.world_size > 1;
    }
    for (int local_rank = first_local_rank; local_rank < self.local_world_size; ++local_rank) {
      auto child = std::make_unique<Child>();
      child->global_rank = self.node_rank * self.local_world_size + local_rank;
      spawn(*child, self, local_rank, executable, arguments, extra_environment);
      Child* watched = child.get();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        supervising_ = true;
        children_.push_back(std::move(child));
      }
      watched->watcher = start_thread_with_signals_blocked([this, watched] { watch(*watched); });
    }
  }

  // Sends `signal_number` to every rank still running.
  void signal_children(int signal_number) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& child : children_) {
      if (!child->exited) ::kill(child->pid, signal_number);
    }
  }

  // ---- child ----
  void listen_to_rank_zero(int global_rank) {
    const auto fd = integer_variable(kChannelVariable);
    if (!fd) return;
    channel_ = static_cast<int>(*fd);
    rank_ = global_rank;
    // Programs this rank starts itself must not hold the channel open.
    ::fcntl(channel_, F_SETFD, FD_CLOEXEC);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      listening_ = true;
    }
    start_thread_with_signals_blocked([this] { listen(); }).detach();
    // The fork set PR_SET_PDEATHSIG=SIGKILL to cover the time until now. From
    // here on rank 0's death shows up as EOF on the channel, and the listener
    // reports it; a SIGKILL arriving at the same moment would kill this rank
    // before it could say why, so it is switched off.
    ::prctl(PR_SET_PDEATHSIG, 0);
  }

  void report_joined() {
    if (channel_ < 0) return;
    ::send(channel_, &kJoinedByte, 1, MSG_NOSIGNAL);
  }

  // ---- both ----
  bool wait_for_known_failure(std::chrono::milliseconds patience) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!supervising_ && !listening_) return false;
    return changed_.wait_for(lock, patience, [this] { return failure_; });
  }

  void stop_reporting_child_exits(const std::string& line) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!line.empty() && !said_why_) {
        said_why_ = true;
        write_stderr_line(line);
      }
      deliberate_stop_ = true;
      ending_ = true;
    }
    // While this process ends the job, the other ranks exit too, and Gloo
    // may throw "connection closed" from one of its own threads; that must
    // not turn the exit code 1 into an abort with a C++ trace.
    std::set_terminate([] {
      flush_stdout_if_free();
      ::_exit(1);
    });
  }

  [[noreturn]] void abort(const std::string& reason, int exit_code) {
    stop_reporting_child_exits(std::string());
    bool supervising = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      supervising = supervising_;
    }
    if (supervising) stop_children(reason);
    flush_stdout_if_free();
    ::_exit(exit_code);
  }

  void finish(bool unwinding) {
    std::unique_lock<std::mutex> lock(mutex_);
    finished_ = true;
    if (!supervising_) return;
    if (unwinding && !failure_) {
      deliberate_stop_ = true;
      lock.unlock();
      stop_children("rank 0 raised an exception");
      lock.lock();
    }
    lock.unlock();
    // A watcher that found a failure ends the process instead of returning.
    for (auto& child : children_) {
      if (child->watcher.joinable()) child->watcher.join();
    }
    lock.lock();
    for (auto& child : children_) {
      if (child->channel >= 0) ::close(child->channel);
      child->channel = -1;
    }
  }

 private:
  LaunchState() = default;

  void spawn(Child& child, const ProcessPlacement& self, int local_rank, const std::string& executable,
             const std::vector<std::string>& arguments, const std::vector<std::string>& extra_environment) {
    int ends[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
      throw std::system_error(errno, std::generic_category(), "fabric: socketpair");
    }
    const int parent_end = ends[0];
    const int child_end = ends[1];

    // Everything the child needs is built before fork(): between fork and
    // exec a multithreaded process may only make async-signal-safe calls.
    std::vector<std::string> environment;
    static const char* const kReplaced[] = {
        "RANK",           "LOCAL_RANK",    "WORLD_SIZE",           "LOCAL_WORLD_SIZE",
        "NODE_RANK",      "GROUP_RANK",    "MASTER_ADDR",          "MASTER_PORT",
        kChannelVariable, kStdoutVariable, kStdoutTerminalVariable};
    const auto name_of = [](const std::string& variable) { return variable.substr(0, variable.find('=')); };
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
      const std::string variable(*entry);
      const std::string name = name_of(variable);
      bool replaced = false;
      for (const char* candidate : kReplaced) replaced = replaced || name == candidate;
      for (const auto& extra : extra_environment) replaced = replaced || name == name_of(extra);
      if (!replaced) environment.push_back(variable);
    }
    environment.insert(environment.end(), extra_environment.begin(), extra_environment.end());
    const auto assign = [&environment](const char* name, const std::string& value) {
      environment.push_back(std::string(name) + "=" + value);
    };
    assign("RANK", std::to_string(child.global_rank));
    assign("LOCAL_RANK", std::to_string(local_rank));
    assign("WORLD_SIZE", std::to_string(self.world_size));
    assign("LOCAL_WORLD_SIZE", std::to_string(self.local_world_size));
    assign("NODE_RANK", std::to_string(self.node_rank));
    assign("GROUP_RANK", std::to_string(self.node_rank));
    assign("MASTER_ADDR", self.master_addr);
    assign("MASTER_PORT", std::to_string(self.master_port));
    assign(kChannelVariable, std::to_string(child_end));

    // Every rank but global rank 0 runs the program's code before
    // fabric.launch() (an options banner, a usage line) with its standard
    // output on /dev/null, so that it is printed once, by rank 0; launch()
    // puts the real one back (restore_stdout_at_launch). Its standard error
    // stays as it is: a rank that fails before launch() must be heard.
    // Its output (both streams) goes through a relay that prefixes each
    // line with the rank (output_relay.h), so that an error printed on every
    // rank says whose it is.
    if (child.global_rank != 0) child.relay = start_output_relay(child.global_rank);
    const int rank_stdout = child.relay.active() ? child.relay.stdout_write : STDOUT_FILENO;
    const int rank_stderr = child.relay.active() ? child.relay.stderr_write : -1;
    int devnull = -1;
    int stdout_copy = -1;
    if (child.global_rank != 0) {
      devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
      stdout_copy = devnull < 0 ? -1 : ::fcntl(rank_stdout, F_DUPFD_CLOEXEC, 3);
      if (stdout_copy < 0) {  // no standard output to keep: leave it alone
        if (devnull >= 0) ::close(devnull);
        devnull = -1;
      } else {
        assign(kStdoutVariable, std::to_string(stdout_copy));
        if (child.relay.stdout_is_terminal) assign(kStdoutTerminalVariable, "1");
      }
    }
    const auto close_stdout_descriptors = [&] {
      close_writers(child.relay);
      if (devnull < 0) return;
      ::close(devnull);
      ::close(stdout_copy);
    };

    std::vector<char*> argv;
    for (const auto& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (const auto& variable : environment) envp.push_back(const_cast<char*>(variable.c_str()));
    envp.push_back(nullptr);
    const std::string exec_failure =
        "fabric: rank " + std::to_string(child.global_rank) + ": cannot execute " + executable + "\n";
    const pid_t parent = ::getpid();

    const pid_t pid = ::fork();
    if (pid < 0) {
      const int error = errno;
      ::close(parent_end);
      ::close(child_end);
      close_stdout_descriptors();
      throw std::system_error(error, std::generic_category(), "fabric: fork");
    }
    if (pid == 0) {
      // The rank starts with no signal blocked, whatever this thread blocks
      // (fabric-run blocks the ones it forwards).
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      // Last resort against orphans until the child's listener runs.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::fcntl(child_end, F_SETFD, 0);  // the descriptors exec keeps
      if (rank_stderr >= 0) {
        ::dup2(rank_stderr, STDERR_FILENO);  // failing, the rank writes to the launcher's stderr
        if (devnull < 0) ::dup2(rank_stdout, STDOUT_FILENO);
      }
      if (devnull >= 0) {
        ::dup2(devnull, STDOUT_FILENO);  // failing, the rank prints as it always did
        ::fcntl(stdout_copy, F_SETFD, 0);
      }
      ::execve(executable.c_str(), argv.data(), envp.data());
      ssize_t ignored = ::write(STDERR_FILENO, exec_failure.data(), exec_failure.size());
      (void)ignored;
      ::_exit(127);
    }
    ::close(child_end);
    close_stdout_descriptors();
    child.pid = pid;
    child.channel = parent_end;
  }

  void watch(Child& child) {
    siginfo_t info{};
    int result;
    // WNOWAIT: the child stays a zombie until marked as exited, so that a
    // kill() from stop_children can never hit a recycled pid.
    do {
      result = ::waitid(P_PID, static_cast<id_t>(child.pid), &info, WEXITED | WNOWAIT);
    } while (result != 0 && errno == EINTR);
    const bool status_known = result == 0;
    // What the rank printed on its way out comes before the line about its
    // exit (its relay ends once the rank's output is closed).
    wait_for_output_relay(child.relay, std::chrono::seconds(1));

    bool joined = false;
    if (status_known && info.si_code == CLD_EXITED && info.si_status == 0) {
      char byte = 0;
      joined = ::recv(child.channel, &byte, 1, MSG_DONTWAIT) == 1 && byte == kJoinedByte;
    }
    std::string reason;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      child.exited = true;
      ::waitpid(child.pid, nullptr, WNOHANG);  // reap
      changed_.notify_all();
      const bool clean = status_known && info.si_code == CLD_EXITED && info.si_status == 0;
      if (failure_ || deliberate_stop_ || (clean && (joined || !require_join_))) return;
      failure_ = true;
      reason = describe_exit(child.global_rank, child.pid, info, status_known);
      if (clean) reason += " before joining the process group";
    }
    changed_.notify_all();
    // The job ends with the failed rank's code, as a shell reports a signal
    // (128 + number); 1 when the rank exited 0 too early or is unknown.
    int exit_code = 1;
    if (status_known && info.si_code == CLD_EXITED && info.si_status != 0) {
      exit_code = info.si_status;
    } else if (status_known && info.si_code != CLD_EXITED) {
      exit_code = 128 + info.si_status;
    }
    stop_job(reason, exit_code);
  }

  [[noreturn]] void stop_job(const std::string& reason, int exit_code) {
    write_stderr_line("fabric: " + reason + "; stopping all ranks");
    stop_children(reason);
    flush_stdout_if_free();
    ::_exit(exit_code);
  }

  // Tells every running child why, waits for them to exit on their own (so
  // their message gets out), then SIGTERM, then SIGKILL.
  void stop_children(const std::string& reason) {
    const std::string message = reason + "\n";
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& child : children_) {
        if (child->exited || child->channel < 0) continue;
        ::send(child->channel, message.data(), message.size(), MSG_NOSIGNAL);
        ::shutdown(child->channel, SHUT_WR);
      }
    }
    const auto all_exited = [this] {
      for (auto& child : children_) {
        if (!child->exited) return false;
      }
      return true;
    };
    std::unique_lock<std::mutex> lock(mutex_);
    if (changed_.wait_for(lock, std::chrono::seconds(3), all_exited)) return;
    for (int signal_number : {SIGTERM, SIGKILL}) {
      for (auto& child : children_) {
        if (!child->exited) ::kill(child->pid, signal_number);
      }
      if (changed_.wait_for(lock, std::chrono::seconds(2), all_exited)) return;
    }
  }

  void listen() {
    std::string message;
    char buffer[512];
    for (;;) {
      const ssize_t received = ::read(channel_, buffer, sizeof buffer);
      if (received > 0) {
        message.append(buffer, static_cast<std::size_t>(received));
        if (message.find('\n') != std::string::npos) break;
      } else if (received < 0 && errno == EINTR) {
        continue;
      } else {
        break;  // EOF: rank 0 is gone
      }
    }
    bool ending = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_) return;  // this rank is done; rank 0 may exit as it likes
      failure_ = true;
      ending = ending_;
      if (!ending) said_why_ = true;  // below; the job monitor says nothing more
    }
    changed_.notify_all();
    // This rank already said why the job ends (abort_job follows): no
    // second message about the same event.
    if (ending) {
      flush_stdout_if_free();
      ::_exit(1);
    }
    const auto newline = message.find('\n');
    if (newline != std::string::npos) message.resize(newline);
    if (message.empty()) message = "rank 0 exited";
    write_stderr_line("fabric: rank " + std::to_string(rank_) + ": stopping because " + message);
    flush_stdout_if_free();
    ::_exit(1);
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::unique_ptr<Child>> children_;
  bool supervising_ = false;      // rank 0 with children
  bool listening_ = false;        // a child listening to rank 0
  bool failure_ = false;          // some rank failed; this process is ending
  bool deliberate_stop_ = false;  // rank 0 stops the children itself
  bool finished_ = false;         // ~Fabric ran
  bool ending_ = false;           // this process is ending the job itself (abort)
  bool said_why_ = false;         // this rank's one line on why it stops is out (or on its way)
  bool require_join_ = true;      // a clean exit before joining is a failure
  int channel_ = -1;              // child: its end of the channel
  int rank_ = 0;                  // child: its global rank, for messages
};

}  // namespace

void restore_stdout_at_launch() {
  const auto descriptor = integer_variable(kStdoutVariable);
  if (!descriptor) return;
  // Programs this rank starts from here on must not see it.
  ::unsetenv(kStdoutVariable);
  const int saved = static_cast<int>(*descriptor);
  // What the program wrote before launch() still goes to /dev/null.
  std::cout.flush();
  std::fflush(stdout);
  if (::dup2(saved, STDOUT_FILENO) < 0) {
    write_stderr_line("fabric: cannot restore this rank's standard output (descriptor " + std::to_string(saved) +
                      "): " + std::strerror(errno));
    return;
  }
  ::close(saved);
  // stdio chose full buffering for /dev/null; a terminal gets lines again
  // (also through the relay, which knows it writes to one).
  const bool terminal = ::isatty(STDOUT_FILENO) == 1 || string_variable(kStdoutTerminalVariable, "") == "1";
  ::unsetenv(kStdoutTerminalVariable);
  if (terminal) std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);
}

void start_local_ranks(const ProcessPlacement& self) {
  const std::vector<std::string> arguments = own_command_line();
  // Rank 0 gets the variables the other ranks are started with, as torchrun
  // gives every rank: code that splits its work by RANK and WORLD_SIZE
  // itself (written for a launcher) agrees on every rank. Set before any
  // thread of the job starts; the children's are built from scratch.
  const auto set = [](const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); };
  set("RANK", std::to_string(self.global_rank));
  set("LOCAL_RANK", std::to_string(self.local_rank));
  set("WORLD_SIZE", std::to_string(self.world_size));
  set("LOCAL_WORLD_SIZE", std::to_string(self.local_world_size));
  set("NODE_RANK", std::to_string(self.node_rank));
  set("GROUP_RANK", std::to_string(self.node_rank));
  set("MASTER_ADDR", self.master_addr);
  set("MASTER_PORT", std::to_string(self.master_port));
  LaunchState::instance().start_children(self, 1, "/proc/self/exe", arguments, {});
}

std::string find_executable(const std::string& name) {
  const auto runnable = [](const std::string& path) { return ::access(path.c_str(), X_OK) == 0; };
  if (name.find('/') != std::string::npos) {
    if (!runnable(name)) {
      throw std::runtime_error("fabric-run: cannot execute '" + name + "': " + std::strerror(errno));
    }
    return name;
  }
  const std::string search_path = string_variable("PATH", "/usr/local/bin:/usr/bin:/bin");
  std::size_t start = 0;
  while (start <= search_path.size()) {
    const std::size_t colon = std::min(search_path.find(':', start), search_path.size());
    const std::string directory = search_path.substr(start, colon - start);
    const std::string candidate = (directory.empty() ? "." : directory) + "/" + name;
    if (runnable(candidate)) return candidate;
    start = colon + 1;
  }
  throw std::runtime_error("fabric-run: '" + name + "' not found in PATH");
}

int run_local_ranks(const ProcessPlacement& node, const std::vector<std::string>& command,
                    const std::vector<std::string>& extra_environment) {
  if (command.empty()) throw std::invalid_argument("fabric-run: no program to run");
  const std::string executable = find_executable(command.front());
  auto& launch = LaunchState::instance();
  // SIGINT/SIGTERM/SIGHUP (Ctrl-C, a scheduler ending the job) go to the
  // ranks; their deaths then end the job through the usual supervision,
  // with the rank named and 128 + signal as exit code. Blocked here and in
  // every thread started later; a dedicated thread receives them.
  sigset_t forwarded;
  sigemptyset(&forwarded);
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&forwarded, signal_number);
  pthread_sigmask(SIG_BLOCK, &forwarded, nullptr);
  std::thread([forwarded, state = &launch] {
    for (;;) {
      int signal_number = 0;
      if (::sigwait(&forwarded, &signal_number) == 0) state->signal_children(signal_number);
    }
  }).detach();
  launch.start_children(node, 0, executable, command, extra_environment);
  // Returns once every rank exited cleanly; a watcher that sees a failure
  // stops the others and exits this process with that rank's code.
  launch.finish(false);
  return 0;
}

void watch_launcher_channel(int global_rank) { LaunchState::instance().listen_to_rank_zero(global_rank); }

void report_joined() { LaunchState::instance().report_joined(); }

bool wait_for_known_failure(std::chrono::milliseconds patience) {
  return LaunchState::instance().wait_for_known_failure(patience);
}

void wait_for_exit_in_progress() {
  std::this_thread::sleep_for(std::chrono::seconds(15));
  write_stderr_line("fabric: timed out waiting for the job to stop");
  flush_stdout_if_free();
  ::_exit(1);
}

void finish_launch(bool unwinding) { LaunchState::instance().finish(unwinding); }

void stop_reporting_child_exits(const std::string& line) { LaunchState::instance().stop_reporting_child_exits(line); }

void abort_job(const std::string& reason, int exit_code) { LaunchState::instance().abort(reason, exit_code); }

}  // namespace detail
}  // namespace fabric
