#!/usr/bin/env python3
"""Multi-process runtime tests that watch the processes from outside.

  launch_driver.py failures PROGRAM
      A rank dies (exit code 3, SIGKILL, an exception, or exit 0 before
      joining) while the others are in all-reduce: every process must end
      within 15 s, rank 0 and the survivors non-zero, stderr must name the
      dead rank, and no process of the job may be left.
  launch_driver.py torchrun PROGRAM
      Two processes started torchrun-style (RANK, WORLD_SIZE, LOCAL_RANK,
      MASTER_ADDR, MASTER_PORT...) join each other and pass the ddp checks.

PROGRAM is fabric_multiprocess_program. Exit status 0 when all cases pass.
"""
import ctypes
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid

DEADLINE_S = 15.0
PR_SET_CHILD_SUBREAPER = 36

problems = []


def report(case, message):
    problems.append(f"{case}: {message}")
    print(f"FAIL {case}: {message}", flush=True)


def processes_with_argument(argument):
    """pids of live (non-zombie) processes whose argv contains `argument`."""
    wanted = argument.encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if wanted in cmdline.read().split(b"\0"):
                    pids.append(int(entry))
        except OSError:
            pass
    return pids


class ProcessRecorder(threading.Thread):
    """Remembers every process that carries the marker while the job runs."""

    def __init__(self, marker):
        super().__init__(daemon=True)
        self.marker = marker
        self.seen = set()
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            self.seen.update(processes_with_argument(self.marker))
            time.sleep(0.02)


def reap_orphans(pids, deadline):
    """Exit codes of job processes that were re-parented to this driver."""
    codes = {}
    pending = set(pids)
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pending.discard(pid)  # not ours: rank 0 reaped it
                continue
            if done:
                codes[pid] = os.waitstatus_to_exitcode(status)
                pending.discard(pid)
        time.sleep(0.02)
    return codes


def run_failure_case(program, case, devices, fail_rank, fail_step, how, expected_lines):
    marker = f"--marker={uuid.uuid4().hex}"
    command = [program, "fail", f"--devices={devices}", f"--fail-rank={fail_rank}",
               f"--fail-step={fail_step}", f"--fail-how={how}", marker]
    recorder = ProcessRecorder(marker)
    start = time.monotonic()
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    recorder.start()
    try:
        # The pipes reach EOF only when every process of the job has closed
        # them, i.e. when all ranks are gone (or at the deadline).
        stdout, stderr = job.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        report(case, f"the job did not end within {DEADLINE_S} s")
        for pid in processes_with_argument(marker):
            os.kill(pid, 9)
        stdout, stderr = job.communicate()
    recorder.stopping.set()
    recorder.join()
    children = recorder.seen - {job.pid}
    orphan_codes = reap_orphans(children, start + DEADLINE_S + 5)
    elapsed = time.monotonic() - start
    stderr = stderr.decode(errors="replace")

    print(f"--- {case}: {elapsed:.2f} s, rank 0 exit {job.returncode}, "
          f"children {sorted(children)}, re-parented exits {orphan_codes}")
    print("\n".join("    " + line for line in stderr.splitlines() if "fabric" in line or "test:" in line))

    if elapsed > DEADLINE_S:
        report(case, f"took {elapsed:.1f} s (limit {DEADLINE_S} s)")
    if job.returncode == 0:
        report(case, "rank 0 exited with code 0")
    if len(children) != devices - 1:
        report(case, f"saw {len(children)} child processes, expected {devices - 1}")
    for pid, code in orphan_codes.items():
        if code == 0:
            report(case, f"rank process {pid} exited with code 0")
    for pattern in expected_lines:
        if not re.search(pattern, stderr, re.MULTILINE):
            report(case, f"stderr lacks /{pattern}/; stderr was:\n{stderr}")
    if stderr.count("stopping all ranks") > 1:
        report(case, "more than one 'stopping all ranks' message")
    for match in re.finditer(r"rank \d+ \(pid (\d+)\)", stderr):
        if int(match.group(1)) not in recorder.seen:
            report(case, f"the message names pid {match.group(1)}, which is not a process of the job")
    leftovers = processes_with_argument(marker) + [
        pid for pid in children if os.path.exists(f"/proc/{pid}")]
    if leftovers:
        report(case, f"processes left behind: {sorted(set(leftovers))}")
        for pid in set(leftovers):
            try:
                os.kill(pid, 9)
            except OSError:
                pass


def failures(program):
    # Orphans (children of a killed rank 0) are re-parented to this driver,
    # so their exit codes can be checked and no zombie is left.
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("warning: PR_SET_CHILD_SUBREAPER failed; exit codes of orphans are not checked")

    dead_rank_1 = r"^fabric: rank 1 \(pid \d+\) exited with code 3; stopping all ranks$"
    run_failure_case(program, "2 ranks, rank 1 exits with 3", 2, 1, 3, "exit", [dead_rank_1])
    run_failure_case(program, "3 ranks, rank 1 exits with 3", 3, 1, 3, "exit", [
        dead_rank_1,
        r"^fabric: rank 2: stopping because rank 1 \(pid \d+\) exited with code 3$"])
    run_failure_case(program, "3 ranks, rank 2 killed", 3, 2, 2, "sigkill", [
        r"^fabric: rank 2 \(pid \d+\) was killed by signal 9 \(Killed\); stopping all ranks$",
        r"^fabric: rank 1: stopping because rank 2 \(pid \d+\) was killed by signal 9"])
    run_failure_case(program, "2 ranks, rank 0 killed", 2, 0, 3, "sigkill", [
        r"^fabric: rank 1: stopping because rank 0 exited$"])
    run_failure_case(program, "3 ranks, rank 0 killed", 3, 0, 3, "sigkill", [
        r"^fabric: rank 1: stopping because rank 0 exited$",
        r"^fabric: rank 2: stopping because rank 0 exited$"])
    run_failure_case(program, "2 ranks, rank 1 throws", 2, 1, 3, "throw", [
        r"^fabric: rank 1 \(pid \d+\) exited with code 4; stopping all ranks$"])
    # ~Fabric on rank 0 during unwinding stops the others, then lets the
    # exception go on (main returns 4).
    run_failure_case(program, "2 ranks, rank 0 throws", 2, 0, 3, "throw", [
        r"^fabric: rank 1: stopping because rank 0 raised an exception$",
        r"^test: caught 'test exception' after the Fabric was destroyed$"])
    run_failure_case(program, "2 ranks, rank 1 exits 0 before launch", 2, 1, -1, "exit", [
        r"^fabric: rank 1 \(pid \d+\) exited with code 0 before joining the process group; "
        r"stopping all ranks$"])


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def torchrun(program):
    world = 2
    base = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world), GROUP_RANK="0")
    ranks = [subprocess.Popen([program, "ddp", f"--devices={world}"],
                              env=dict(base, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for r in range(world)]
    outputs = []
    for r, process in enumerate(ranks):
        try:
            stdout, stderr = process.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            for other in ranks:
                other.kill()
            stdout, stderr = process.communicate()
            report("torchrun", f"rank {r} did not finish within 90 s")
        outputs.append(stdout.decode(errors="replace"))
        if process.returncode != 0:
            report("torchrun", f"rank {r} exited with {process.returncode}:\n"
                               f"{stderr.decode(errors='replace')}")
    passed = "ddp checks passed on 2 ranks"
    if outputs[0].count(passed) != 1:
        report("torchrun", f"rank 0 did not print '{passed}' once: {outputs[0]!r}")
    if passed in outputs[1]:
        report("torchrun", "rank 1 printed through fabric.print")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("failures", "torchrun"):
        print(__doc__)
        return 2
    {"failures": failures, "torchrun": torchrun}[sys.argv[1]](sys.argv[2])
    if problems:
        print(f"{len(problems)} problem(s)")
        return 1
    print("all cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
