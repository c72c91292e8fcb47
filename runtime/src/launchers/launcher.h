// Process placement and supervision for Fabric (no LibTorch here).
//
// Rank 0 of a job Fabric launches itself forks+execs the program for local
// ranks 1..N-1. Each child gets one end of a socketpair: rank 0 writes the
// reason into it when the job must stop, and the child sees EOF when rank 0
// dies. Rank 0 watches every child with waitid(); the first failure stops all.
#pragma once

#include "plugins/environments/process_placement.h"
#include "utilities/messages.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace fabric {
namespace detail {

// Rank 0 side. Re-executes this program (/proc/self/exe, argv from
// /proc/self/cmdline, never a shell) for local ranks 1..local_world_size-1
// of `self`'s node and starts one watcher thread per child. Every process
// started here or by run_local_ranks other than global rank 0 starts with
// its standard output on /dev/null (see restore_stdout_at_launch).
void start_local_ranks(const ProcessPlacement& self);

// fabric-run side: starts `command` (argv; argv[0] a path, or a name looked
// up in PATH; never through a shell) for every local rank of `node`'s node,
// with the launcher environment plus `extra_environment` ("NAME=value"), and
// supervises them as rank 0 supervises its children. Returns 0 when all
// ranks exit cleanly; on the first failure stops the others and exits the
// process with the failed rank's exit code (128 + signal for a signal).
int run_local_ranks(const ProcessPlacement& node, const std::vector<std::string>& command,
                    const std::vector<std::string>& extra_environment);

// Child side, first thing in Fabric::launch(): a rank other than global
// rank 0 that Fabric's launcher or fabric-run started runs with its standard
// output on /dev/null until here (so that what main prints before launch()
// is printed once, by rank 0); what was written so far is flushed there, and
// the launcher's standard output is put back as fd 1. Nothing otherwise.
void restore_stdout_at_launch();

// Child side: when this process was started by start_local_ranks, starts
// the thread that listens to rank 0 and records this rank for messages.
void watch_launcher_channel(int global_rank);
// Child side: tells rank 0 this rank completed the rendezvous, so that a
// clean exit afterwards is not mistaken for a rank that never joined.
void report_joined();

// True when a failure elsewhere in the job is known (or becomes known within
// `patience`); a watcher thread is then already ending this process.
bool wait_for_known_failure(std::chrono::milliseconds patience);
// Blocks while a watcher thread finishes the process; exits(1) as a fallback.
[[noreturn]] void wait_for_exit_in_progress();

// ~Fabric. Rank 0: waits for every child it started; if `unwinding` (an
// exception is leaving the scope of the Fabric), first tells them to stop.
// Children: stops reacting to rank 0's exit (this rank is done).
void finish_launch(bool unwinding);

// This process is ending the job itself (abort_job follows): from now on
// neither the exit of a child it started nor a stop message from rank 0 is
// reported again. A `line` (this rank's one line on why it stops) is said
// first, unless a stop message from rank 0 already made this process say
// why: one line either way, and never none (rank 0's message, arriving once
// this process is ending, is not reported; so the line goes out before).
void stop_reporting_child_exits(const std::string& line = std::string());
// Ends the job from this process: the ranks it started (if any) are told
// `reason` (they print "stopping because <reason>") and waited for, then
// this process exits with `exit_code` (stdout flushed if free). Callable
// from any thread.
[[noreturn]] void abort_job(const std::string& reason, int exit_code);

}  // namespace detail
}  // namespace fabric
