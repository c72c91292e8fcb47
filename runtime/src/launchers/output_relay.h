// Each line a rank other than global rank 0 prints, prefixed with its rank.
//
// A rank the launcher starts writes its standard output and error into two
// pipes; a small relay process reads them and writes every line, as one
// write(), to the launcher's own output with "[rank N] " in front. Lines
// the runtime writes itself ("fabric: ...") pass unchanged: they name the
// rank where it matters, and scripts match them as they are. Global rank
// 0's output is the job's output and is never relayed.
//
// The relay is a process, not a thread of the rank: a rank that aborts, or
// is killed, right after printing why still has its last lines delivered
// (the relay reads until every writer has closed the pipes, then exits).
#pragma once

#include <sys/types.h>

#include <chrono>

namespace fabric {
namespace detail {

struct OutputRelay {
  pid_t pid = -1;
  int stdout_write = -1;  // what the rank gets as its standard output
  int stderr_write = -1;  // ... and as its standard error
  int done_read = -1;     // EOF once the relay has delivered everything and exited
  bool stdout_is_terminal = false;

  bool active() const { return stderr_write >= 0; }
};

// Starts the relay for `global_rank` (a child of this process that never
// execs; titled "fabric output relay [rank N]" in ps).
// The write ends are close-on-exec in this process; the caller hands them to
// the rank and then closes them with close_writers(). Returns an inactive
// relay (the rank writes directly, as before) when this process has no
// standard output or error to relay to, or a pipe or fork fails.
OutputRelay start_output_relay(int global_rank);

// Closes the write ends in the launcher once the rank holds its own copies.
void close_writers(OutputRelay& relay);

// Waits up to `patience` for the relay to deliver what the rank wrote before
// it exited (so that its last words come before the launcher's line about
// its exit), then closes done_read and reaps the relay.
void wait_for_output_relay(OutputRelay& relay, std::chrono::milliseconds patience);

}  // namespace detail
}  // namespace fabric
