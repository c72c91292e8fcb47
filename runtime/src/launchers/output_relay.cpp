#include "launchers/output_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace fabric {
namespace detail {
namespace {

// Everything below runs in the relay, a fork of a multithreaded process
// that never execs: async-signal-safe calls only (read, write, poll, close,
// sigaction, _exit), no allocation.

constexpr std::size_t kBufferSize = 1 << 16;
constexpr std::size_t kPrefixCapacity = 32;
// A line still without its newline after this long is written as it is (a
// prompt, a progress bar): the rank's output is never held back for good.
constexpr int kPartialLineMilliseconds = 50;
constexpr char kRuntimeLine[] = "fabric: ";

struct RelayedStream {
  int from = -1;  // the pipe's read end
  int to = -1;    // the launcher's descriptor (1 or 2)
  char* buffer = nullptr;
  std::size_t used = 0;
  bool at_line_start = true;
  bool open = true;
};

struct Prefix {
  char text[kPrefixCapacity];
  std::size_t size = 0;
};

// The memory /proc/<pid>/cmdline shows (the original argv strings). The
// relay is a fork that never execs: without a title of its own, ps (and a
// script looking for the program's processes by argument) would show one
// more copy of the program per rank.
struct CommandLineArea {
  char* start = nullptr;
  std::size_t size = 0;
};
constexpr char kRelayTitle[] = "fabric output relay";

char stdout_buffer[kBufferSize];
char stderr_buffer[kBufferSize];
char line_buffer[kPrefixCapacity + kBufferSize];

void write_all(int descriptor, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t written = ::write(descriptor, data, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;  // the launcher's output is gone: drop, keep draining
    data += written;
    size -= static_cast<std::size_t>(written);
  }
}

// Writes `size` bytes of one line (all of it when `ends_line`), with the
// prefix when they start the line and are not the runtime's own.
void emit(RelayedStream& stream, const Prefix& prefix, const char* data, std::size_t size, bool ends_line) {
  const std::size_t marker = sizeof kRuntimeLine - 1;
  const bool runtime_line = size >= marker && std::memcmp(data, kRuntimeLine, marker) == 0;
  std::size_t at = 0;
  if (stream.at_line_start && !runtime_line) {
    std::memcpy(line_buffer, prefix.text, prefix.size);
    at = prefix.size;
  }
  std::memcpy(line_buffer + at, data, size);
  write_all(stream.to, line_buffer, at + size);
  stream.at_line_start = ends_line;
}

// Writes every complete line buffered; the rest too when `flush` (or when
// the buffer is full: a line longer than it goes out in pieces).
void drain(RelayedStream& stream, const Prefix& prefix, bool flush) {
  std::size_t start = 0;
  while (start < stream.used) {
    const char* newline = static_cast<const char*>(std::memchr(stream.buffer + start, '\n', stream.used - start));
    if (newline == nullptr) break;
    const std::size_t end = static_cast<std::size_t>(newline - stream.buffer) + 1;
    emit(stream, prefix, stream.buffer + start, end - start, true);
    start = end;
  }
  const std::size_t rest = stream.used - start;
  // A partial line waits for its rest (the poll's timeout flushes it after
  // kPartialLineMilliseconds), unless this is the end or the buffer is full.
  if (rest > 0 && (flush || stream.used == kBufferSize)) {
    emit(stream, prefix, stream.buffer + start, rest, false);
    start = stream.used;
  }
  if (start > 0) {
    std::memmove(stream.buffer, stream.buffer + start, stream.used - start);
    stream.used -= start;
  }
}

// Keeps `keep` (sorted, each >= 3) and 0-2, closes every other descriptor:
// the relay must not hold the launcher's sockets (a rank sees rank 0's
// death as EOF on one) or another relay's pipes.
void close_all_but(const int* keep, int count, long highest) {
  long from = 3;
  for (int i = 0; i <= count; ++i) {
    const long to = i < count ? keep[i] - 1 : highest;
    if (from <= to) {
#ifdef SYS_close_range
      if (::syscall(SYS_close_range, static_cast<unsigned>(from), static_cast<unsigned>(to), 0u) == 0) {
        from = i < count ? keep[i] + 1 : highest + 1;
        continue;
      }
#endif
      for (long descriptor = from; descriptor <= to; ++descriptor) ::close(static_cast<int>(descriptor));
    }
    from = i < count ? keep[i] + 1 : highest + 1;
  }
}

void retitle(const CommandLineArea& area, const Prefix& prefix) {
  ::prctl(PR_SET_NAME, "fabric-relay", 0, 0, 0);
  if (area.start == nullptr || area.size < 2) return;
  // "fabric output relay [rank N]", NUL-padded over the old arguments.
  std::memset(area.start, 0, area.size);
  std::size_t at = std::min(sizeof kRelayTitle - 1, area.size - 1);
  std::memcpy(area.start, kRelayTitle, at);
  for (std::size_t i = 0; i < prefix.size && at + 1 < area.size; ++i) {
    area.start[at++] = i == 0 ? ' ' : prefix.text[i - 1];
  }
}

[[noreturn]] void run_relay(int stdout_read, int stderr_read, int done_write, const Prefix& prefix,
                            const CommandLineArea& command_line, long highest_descriptor) {
  retitle(command_line, prefix);
  // Interrupting the job (Ctrl-C, SIGTERM to the process group) stops the
  // ranks; the relay still delivers what they said on the way out, and
  // ends when they have closed their output.
  struct sigaction ignore{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2}) {
    ::sigaction(signal_number, &ignore, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  int keep[] = {stdout_read, stderr_read, done_write};
  std::sort(keep, keep + 3);
  close_all_but(keep, 3, highest_descriptor);

  RelayedStream streams[2];
  streams[0].from = stdout_read;
  streams[0].to = STDOUT_FILENO;
  streams[0].buffer = stdout_buffer;
  streams[1].from = stderr_read;
  streams[1].to = STDERR_FILENO;
  streams[1].buffer = stderr_buffer;
  for (;;) {
    pollfd watched[2];
    RelayedStream* of[2];
    int count = 0;
    bool partial = false;
    for (auto& stream : streams) {
      if (!stream.open) continue;
      watched[count] = pollfd{stream.from, POLLIN, 0};
      of[count++] = &stream;
      partial = partial || stream.used > 0;
    }
    if (count == 0) break;
    const int ready = ::poll(watched, static_cast<nfds_t>(count), partial ? kPartialLineMilliseconds : -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (ready == 0) {
      for (auto& stream : streams) drain(stream, prefix, true);
      continue;
    }
    for (int i = 0; i < count; ++i) {
      if (watched[i].revents == 0) continue;
      RelayedStream& stream = *of[i];
      const ssize_t received = ::read(stream.from, stream.buffer + stream.used, kBufferSize - stream.used);
      if (received > 0) {
        stream.used += static_cast<std::size_t>(received);
        drain(stream, prefix, false);
      } else if (received == 0 || (errno != EINTR && errno != EAGAIN)) {
        drain(stream, prefix, true);
        stream.open = false;
        ::close(stream.from);
      }
    }
  }
  for (auto& stream : streams) drain(stream, prefix, true);
  ::_exit(0);  // closes done_write: the launcher's wait ends
}

bool open_descriptor(int descriptor) { return ::fcntl(descriptor, F_GETFD) >= 0; }

// Fields 48 and 49 of /proc/self/stat: where the argument strings lie.
CommandLineArea command_line_area() {
  std::ifstream file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto after_name = stat.rfind(')');  // the name may hold spaces
  if (after_name == std::string::npos) return {};
  std::istringstream fields(stat.substr(after_name + 2));
  std::string field;
  unsigned long long start = 0;
  unsigned long long end = 0;
  for (int number = 3; fields >> field; ++number) {
    if (number == 48) start = std::strtoull(field.c_str(), nullptr, 10);
    if (number == 49) {
      end = std::strtoull(field.c_str(), nullptr, 10);
      break;
    }
  }
  if (start == 0 || end <= start) return {};
  return {reinterpret_cast<char*>(static_cast<std::uintptr_t>(start)), static_cast<std::size_t>(end - start)};
}

void close_if_open(int& descriptor) {
  if (descriptor >= 0) ::close(descriptor);
  descriptor = -1;
}

}  // namespace

OutputRelay start_output_relay(int global_rank) {
  OutputRelay relay;
  if (!open_descriptor(STDOUT_FILENO) || !open_descriptor(STDERR_FILENO)) return relay;
  // Built before fork(): the relay may not allocate.
  Prefix prefix;
  const std::string text = "[rank " + std::to_string(global_rank) + "] ";
  prefix.size = std::min(text.size(), kPrefixCapacity);
  std::memcpy(prefix.text, text.data(), prefix.size);
  const CommandLineArea command_line = command_line_area();
  rlimit limit{};
  long highest = 65535;
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    highest = static_cast<long>(limit.rlim_cur) - 1;
  }

  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int done[2] = {-1, -1};
  const auto close_pipes = [&] {
    for (int* pair : {out, err, done}) {
      close_if_open(pair[0]);
      close_if_open(pair[1]);
    }
  };
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(done, O_CLOEXEC) != 0) {
    close_pipes();
    return relay;
  }
  // A child of the launcher, which reaps it (wait_for_output_relay); if the
  // launcher dies first, it is adopted and still delivers the rank's last
  // lines (a rank's "stopping because rank 0 exited").
  const pid_t pid = ::fork();
  if (pid < 0) {
    close_pipes();
    return relay;
  }
  if (pid == 0) run_relay(out[0], err[0], done[1], prefix, command_line, highest);
  close_if_open(out[0]);
  close_if_open(err[0]);
  close_if_open(done[1]);
  relay.pid = pid;
  relay.stdout_write = out[1];
  relay.stderr_write = err[1];
  relay.done_read = done[0];
  relay.stdout_is_terminal = ::isatty(STDOUT_FILENO) == 1;
  return relay;
}

void close_writers(OutputRelay& relay) {
  close_if_open(relay.stdout_write);
  close_if_open(relay.stderr_write);
}

void wait_for_output_relay(OutputRelay& relay, std::chrono::milliseconds patience) {
  if (relay.done_read < 0) return;
  bool delivered = false;
  const auto deadline = std::chrono::steady_clock::now() + patience;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd done{relay.done_read, POLLIN, 0};
    const int ready = ::poll(&done, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    delivered = ready > 0;
    break;  // EOF (the relay is exiting), or an error: stop waiting either way
  }
  close_if_open(relay.done_read);
  // Reaped now, or (still delivering for a process the rank left running)
  // by whoever adopts it once the launcher exits.
  pid_t reaped;
  do {
    reaped = ::waitpid(relay.pid, nullptr, delivered ? 0 : WNOHANG);
  } while (reaped < 0 && errno == EINTR);
  relay.pid = -1;
}

}  // namespace detail
}  // namespace fabric
