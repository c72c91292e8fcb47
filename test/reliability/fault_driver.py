#!/usr/bin/env python3
"""The runtime under faults: real processes, real Gloo and TCPStore on 127.0.0.1.

  fault_driver.py GROUP PROGRAM      (PROGRAM is fabric_fault_program)

Groups:
  kill_forward, kill_backward, kill_save
      2 ranks train with a checkpoint after every step; rank 0, then rank 1,
      sends itself SIGKILL at step 3 inside forward / inside backward (while
      gradient buckets are being all-reduced) / during the save (between the
      temporary file and the rename). Checked: every process ends within
      15 s, the survivor non-zero, stderr names the dead rank, no process of
      the job is left in the process table; the checkpoint of the previous
      step loads, and resuming from it reproduces the uninterrupted run's
      losses bit for bit.
  rendezvous
      a rank started (torchrun-style) with another world size; the master
      port already taken by another program (Fabric's own launch, and
      torchrun-style ranks): a clear error within a bounded time, never a
      hang, nothing left behind.
  checkpoint_files
      saving into a missing directory, under a regular file, into a directory
      the user cannot write; loading a truncated and a corrupted checkpoint:
      a clear error on every rank, no crash, no hang.
  security
      the listening sockets of a running 2-rank job are bound to loopback
      only (read from /proc/net/tcp{,6}); launch() re-executes the program
      without a shell (spaces, quotes, $(...), globs reach every rank
      verbatim); a symlink planted at a checkpoint's final path is replaced,
      its target untouched.

Exit status 0 when every case passes; each failure is printed as FAIL.
"""
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

# The process-table helpers the runtime's launch tests use (test/runtime).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runtime"))
from launch_driver import ProcessRecorder, free_port, processes_with_argument, reap_orphans  # noqa: E402

DEADLINE_S = 15.0
PR_SET_CHILD_SUBREAPER = 36
KILL_STEP = 3
STEPS = 6

problems = []
passed = []


def report(case, message):
    problems.append(f"{case}: {message}")
    print(f"FAIL {case}: {message}", flush=True)


def ok(case, message=""):
    passed.append(case)
    print(f"ok   {case}{': ' + message if message else ''}", flush=True)


def kill_leftovers(case, marker, extra=()):
    left = set(processes_with_argument(marker)) | {p for p in extra if os.path.exists(f"/proc/{p}")}
    # Zombies of our own children are not "left behind"; reap them.
    for pid in list(left):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                left.discard(pid)
        except ChildProcessError:
            pass
    if left:
        report(case, f"processes left behind: {sorted(left)}")
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return not left


def run_watched(case, command, deadline=DEADLINE_S, env=None, **popen):
    """Runs a job; returns (rank 0 code, stdout, stderr, elapsed, other pids, their codes)."""
    marker = f"--marker={uuid.uuid4().hex}"
    recorder = ProcessRecorder(marker)
    start = time.monotonic()
    job = subprocess.Popen(command + [marker], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=env, **popen)
    recorder.start()
    try:
        stdout, stderr = job.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        report(case, f"the job did not end within {deadline} s")
        for pid in processes_with_argument(marker):
            os.kill(pid, signal.SIGKILL)
        stdout, stderr = job.communicate()
    elapsed = time.monotonic() - start
    recorder.stopping.set()
    recorder.join()
    others = recorder.ranks() - {job.pid}
    codes = reap_orphans(others, time.monotonic() + 5)
    reap_orphans(recorder.relays, time.monotonic() + 5)  # the ranks' output relays, adopted here
    kill_leftovers(case, marker, others | recorder.relays)
    return (job.returncode, stdout.decode(errors="replace"), stderr.decode(errors="replace"),
            elapsed, others, codes)


def show(case, stderr):
    lines = [line for line in stderr.splitlines() if line.startswith(("fabric", "test:"))]
    print("\n".join(f"    [{case}] {line}" for line in lines[:12]))


def losses(stdout):
    return [line for line in stdout.splitlines() if line.startswith("step ")]


# ---- kills during forward / backward / save ----------------------------------

def kill_group(program, where):
    with tempfile.TemporaryDirectory() as reference_dir:
        code, stdout, stderr, _, _, _ = run_watched(
            "reference", [program, "train", f"--dir={reference_dir}", f"--steps={STEPS}"],
            deadline=90)
        full = losses(stdout)
        if code != 0 or len(full) != STEPS:
            report("reference", f"the uninterrupted run failed (exit {code}):\n{stdout}\n{stderr}")
            return
    for victim in (0, 1):
        case = f"SIGKILL of rank {victim} {where} at step {KILL_STEP}"
        with tempfile.TemporaryDirectory() as directory:
            code, stdout, stderr, elapsed, others, codes = run_watched(case, [
                program, "train", f"--dir={directory}", f"--steps={STEPS}",
                f"--kill-rank={victim}", f"--kill-step={KILL_STEP}", f"--kill-at={where}"])
            show(case, stderr)
            print(f"    [{case}] {elapsed:.2f} s, rank 0 exit {code}, other ranks' exits {codes}")
            failures_before = len(problems)
            if f"test: rank {victim} sends itself SIGKILL" not in stderr:
                report(case, f"rank {victim} never reached the kill point:\n{stderr}")
            if elapsed > DEADLINE_S:
                report(case, f"took {elapsed:.1f} s (limit {DEADLINE_S} s)")
            if code == 0:
                report(case, "rank 0 exited with code 0")
            if len(others) != 1:
                report(case, f"saw {len(others)} other rank processes, expected 1")
            for pid, other in codes.items():
                if other == 0:
                    report(case, f"rank process {pid} exited with code 0")
            if victim == 0:
                named = r"^fabric: rank 1: stopping because rank 0 exited$"
            else:
                named = r"^fabric: rank 1 \(pid \d+\) was killed by signal 9 \(Killed\); stopping all ranks$"
            if not re.search(named, stderr, re.MULTILINE):
                report(case, f"stderr lacks /{named}/:\n{stderr}")
            if losses(stdout) != full[:len(losses(stdout))]:
                report(case, "the losses before the kill differ from the reference")

            # The previous checkpoint loads and the run resumes exactly.
            code, stdout, stderr, _, _, _ = run_watched(case + ", resume", [
                program, "train", f"--dir={directory}", f"--steps={STEPS}", "--resume"],
                deadline=90)
            resumed = re.search(r"^resumed at step (\d+)$", stdout, re.MULTILINE)
            if code != 0 or not resumed:
                report(case, f"resume failed (exit {code}):\n{stdout}\n{stderr}")
                continue
            at = int(resumed.group(1))
            if at != KILL_STEP:
                report(case, f"the checkpoint holds step {at}, expected {KILL_STEP} "
                             "(the last completed save)")
            if losses(stdout) != full[at:]:
                report(case, f"resumed losses differ:\n full:    {full[at:]}\n resumed: "
                             f"{losses(stdout)}")
            if os.path.exists(f"{directory}/train.ckpt.tmp"):
                report(case, "the temporary file is still there after a complete save")
            if len(problems) == failures_before:
                ok(case, f"ended in {elapsed:.1f} s, resumed at step {at} with "
                         f"{len(full) - at} identical losses")


# ---- rendezvous faults ---------------------------------------------------------

def torchrun_env(rank, world, port, extra=None):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
               LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
               GROUP_RANK="0")
    env.update(extra or {})
    return env


def run_ranks(case, program, envs, arguments, deadline):
    """Starts one process per environment; returns [(code, stderr)], elapsed."""
    marker = f"--marker={uuid.uuid4().hex}"
    start = time.monotonic()
    ranks = [subprocess.Popen([program] + arguments + [marker], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for env in envs]
    results = []
    for process in ranks:
        left = max(0.1, deadline - (time.monotonic() - start))
        try:
            _, stderr = process.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            report(case, f"a rank did not end within {deadline} s")
            for other in ranks:
                other.kill()
            _, stderr = process.communicate()
        results.append((process.returncode, stderr.decode(errors="replace")))
    elapsed = time.monotonic() - start
    kill_leftovers(case, marker)
    return results, elapsed


def rendezvous(program):
    # A rank that believes in another world size. Options::timeout bounds
    # the wait; the job must fail, not hang and not train with a wrong world.
    case = "rank 1 started with WORLD_SIZE=3 while rank 0 has 2"
    port = free_port()
    envs = [torchrun_env(0, 2, port), torchrun_env(1, 3, port)]
    results, elapsed = run_ranks(case, program, envs, ["join", "--devices=2", "--timeout-ms=5000"],
                                 deadline=40)
    for rank, (code, stderr) in enumerate(results):
        show(f"{case}, rank {rank}", stderr)
    before = len(problems)
    if any(code == 0 for code, _ in results):
        report(case, f"a rank exited 0: {[code for code, _ in results]}")
    if any("joined" in stderr and "test: rank" in stderr for _, stderr in results):
        report(case, "a rank passed the barrier with a wrong world")
    if not any(re.search(r"world size|timed out|timeout|Timed out", stderr, re.IGNORECASE)
               for _, stderr in results):
        report(case, "no rank says what went wrong:\n" + "\n".join(s for _, s in results))
    if len(problems) == before:
        ok(case, f"both ranks failed in {elapsed:.1f} s")

    # The master port is taken: Fabric's own launch (single node). A clear
    # error at once, no child started.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(4)
        port = squatter.getsockname()[1]
        case = f"master port {port} already taken (fabric launch)"
        env = dict(os.environ, MASTER_PORT=str(port))
        code, stdout, stderr, elapsed, others, _ = run_watched(case, [
            program, "join", "--devices=2", "--timeout-ms=10000"], deadline=30, env=env)
        show(case, stderr)
        before = len(problems)
        if code == 0:
            report(case, "exit code 0")
        if not re.search(rf"{port}|address already in use", stderr, re.IGNORECASE):
            report(case, f"the error names neither the port nor the cause:\n{stderr}")
        if elapsed > DEADLINE_S:
            report(case, f"took {elapsed:.1f} s")
        if len(problems) == before:
            ok(case, f"exit {code} in {elapsed:.1f} s, {len(others)} child processes")

        # torchrun-style ranks pointed at the taken port: rank 0 cannot serve
        # it, rank 1 reaches the squatter; both fail within the timeout.
        case = f"master port {port} already taken (torchrun-style ranks)"
        envs = [torchrun_env(0, 2, port), torchrun_env(1, 2, port)]
        results, elapsed = run_ranks(case, program, envs, ["join", "--devices=2",
                                                           "--timeout-ms=5000"], deadline=40)
        for rank, (code, stderr) in enumerate(results):
            show(f"{case}, rank {rank}", stderr)
        before = len(problems)
        if any(code == 0 for code, _ in results):
            report(case, f"a rank exited 0: {[code for code, _ in results]}")
        for rank, (_, stderr) in enumerate(results):
            if not re.search(rf"rendezvous store .*{port}", stderr):
                report(case, f"rank {rank}'s error does not name the store's port:\n{stderr}")
        if len(problems) == before:
            ok(case, f"exits {[code for code, _ in results]} in {elapsed:.1f} s")


# ---- checkpoint files ------------------------------------------------------------

def as_unprivileged():
    """preexec_fn that drops root to nobody, so that file modes apply."""
    if os.geteuid() != 0:
        return None

    def drop():
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    return drop


def save_error_case(case, program, path, expected, preexec=None):
    code, stdout, stderr, elapsed, others, codes = run_watched(
        case, [program, "save_to", "--devices=2", f"--path={path}"], deadline=DEADLINE_S * 2,
        preexec_fn=preexec)
    show(case, stderr)
    before = len(problems)
    if code == 0:
        report(case, "exit code 0")
    if code is not None and code < 0:
        report(case, f"rank 0 crashed with signal {-code}")
    # Ranks other than 0 print through the launcher's relay: "[rank N] " first.
    failed = []
    for prefix, rank, message in re.findall(r"^(\[rank \d\] )?test: rank (\d): save failed: (.*)$", stderr,
                                            re.MULTILINE):
        if prefix != ("" if rank == "0" else f"[rank {rank}] "):
            report(case, f"rank {rank}'s line carries the prefix {prefix!r}")
        failed.append((rank, message))
    if sorted(rank for rank, _ in failed) != ["0", "1"]:
        report(case, f"not every rank got the error: {failed}\n{stderr}")
    for _, message in failed:
        if not re.search(expected, message):
            report(case, f"the error lacks /{expected}/: {message}")
    if len(problems) == before:
        ok(case, f"every rank: {failed[0][1] if failed else ''}")


def checkpoint_files(program):
    with tempfile.TemporaryDirectory() as directory:
        save_error_case("save into a missing directory", program,
                        f"{directory}/no/such/dir/model.ckpt",
                        r"cannot create .*no/such/dir/model\.ckpt\.tmp.*No such file or directory")
        with open(f"{directory}/plain_file", "w") as file:
            file.write("x")
        save_error_case("save under a regular file", program, f"{directory}/plain_file/model.ckpt",
                        r"cannot (create|remove the old temporary file) .*plain_file/model\.ckpt\.tmp.*Not a directory")
        locked = f"{directory}/read_only"
        os.mkdir(locked, 0o555)
        os.chmod(directory, 0o755)
        drop = as_unprivileged()
        if drop is not None:
            print("    (running as root: the read-only-directory case runs as uid 65534)")
        save_error_case("save into a read-only directory", program, f"{locked}/model.ckpt",
                        r"cannot create .*read_only/model\.ckpt\.tmp.*Permission denied",
                        preexec=drop)
        if os.listdir(locked):
            report("save into a read-only directory", f"files appeared: {os.listdir(locked)}")

    # A truncated and a corrupted checkpoint: resume fails with a clear
    # error on every rank, no crash.
    with tempfile.TemporaryDirectory() as directory:
        code, stdout, stderr, _, _, _ = run_watched("checkpoint to damage", [
            program, "train", f"--dir={directory}", "--steps=2"], deadline=90)
        path = f"{directory}/train.ckpt"
        if code != 0 or not os.path.exists(path):
            report("checkpoint to damage", f"exit {code}:\n{stderr}")
            return
        with open(path, "rb") as file:
            good = file.read()
        middle = len(good) // 2
        damaged = {"truncated checkpoint": good[:middle],
                   "corrupted checkpoint": good[:middle] + bytes(b ^ 0x5A for b in good[middle:middle + 512]) + good[middle + 512:],
                   "checkpoint with one flipped bit": good[:middle] + bytes([good[middle] ^ 0x01]) + good[middle + 1:],
                   "empty checkpoint": b""}
        for case, data in damaged.items():
            with open(path, "wb") as file:
                file.write(data)
            code, stdout, stderr, elapsed, _, _ = run_watched(case, [
                program, "train", f"--dir={directory}", "--steps=2", "--resume"],
                deadline=DEADLINE_S * 2)
            show(case, stderr)
            before = len(problems)
            if code == 0:
                report(case, "resume from a damaged checkpoint exited 0")
            if code is not None and code < 0:
                report(case, f"rank 0 crashed with signal {-code}")
            if not re.search(r"truncated or corrupted|not a fabric::State|cannot (read|load|open)",
                             stderr):
                report(case, f"no clear error:\n{stderr}")
            if "Segmentation" in stderr or "terminate called" in stderr:
                report(case, f"crashed:\n{stderr}")
            if len(problems) == before:
                first = next((l for l in stderr.splitlines() if "fabric" in l), "")
                ok(case, f"exit {code} in {elapsed:.1f} s: {first[:160]}")


# ---- security ---------------------------------------------------------------------

def socket_inodes(pid):
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            match = re.fullmatch(r"socket:\[(\d+)\]", target)
            if match:
                inodes.add(match.group(1))
    except OSError:
        pass
    return inodes


def listening_sockets():
    """inode -> (family, address, port) of every TCP socket in LISTEN."""
    found = {}
    for family in ("tcp", "tcp6"):
        try:
            with open(f"/proc/net/{family}") as table:
                rows = table.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A":
                continue
            address, port = local.split(":")
            raw = bytes.fromhex(address)
            if family == "tcp":
                text = socket.inet_ntop(socket.AF_INET, raw[::-1])
            else:
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                text = socket.inet_ntop(socket.AF_INET6, words)
            found[inode] = (family, text, int(port, 16))
    return found


def is_loopback(text):
    return text.startswith("127.") or text in ("::1", "::ffff:127.0.0.1") or \
        text.startswith("::ffff:127.")


def security(program):
    case = "rendezvous and Gloo listen on loopback only"
    marker = f"--marker={uuid.uuid4().hex}"
    job = subprocess.Popen([program, "wait", "--devices=2", "--seconds=4", marker],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    listening = {}
    try:
        line = job.stdout.readline().decode()
        if line.strip() != "ready":
            report(case, f"the job did not get ready: {line!r}")
        else:
            pids = processes_with_argument(marker)
            table = listening_sockets()
            for pid in pids:
                for inode in socket_inodes(pid):
                    if inode in table:
                        listening[inode] = (pid,) + table[inode]
    finally:
        _, stderr = job.communicate(timeout=60)
    kill_leftovers(case, marker)
    for inode, (pid, family, address, port) in sorted(listening.items()):
        print(f"    [{case}] pid {pid} listens on {family} {address}:{port}")
    before = len(problems)
    if job.returncode != 0:
        report(case, f"the job failed (exit {job.returncode}):\n{stderr.decode(errors='replace')}")
    if not listening:
        report(case, "found no listening socket of the job: the check saw nothing")
    exposed = [v for v in listening.values() if not is_loopback(v[2])]
    if exposed:
        report(case, "listening beyond loopback: " +
               ", ".join(f"pid {p} {f} {a}:{port}" for p, f, a, port in exposed))
    if len(problems) == before:
        ok(case, f"{len(listening)} listening sockets, all on loopback")

    # launch() re-executes the program directly, never through a shell.
    case = "launch() passes argv verbatim (no shell)"
    canary = f"/tmp/fabric_reliability_injected_{uuid.uuid4().hex}"
    awkward = ["two words", "it's", '"double"', f"$(touch {canary})", f"`touch {canary}`",
               "; touch " + canary, "*", "", "back\\slash", "tab\there", "new\nline", "ünï", "--devices=2"]
    with tempfile.TemporaryDirectory() as directory:
        code, stdout, stderr, elapsed, others, _ = run_watched(
            case, [program, "argv", directory] + awkward, deadline=60)
        before = len(problems)
        if code != 0:
            report(case, f"exit {code}:\n{stderr}")
        else:
            for rank in range(2):
                with open(f"{directory}/rank{rank}.argv", "rb") as file:
                    # The marker travels last; drop it.
                    received = file.read().decode().split("\0")[:-1][:-1]
                if received != awkward:
                    report(case, f"rank {rank} got {received!r}, expected {awkward!r}")
        if os.path.exists(canary):
            os.remove(canary)
            report(case, "an argument was run by a shell")
        if len(problems) == before:
            ok(case, f"{len(awkward)} arguments identical on 2 ranks")

    case = "symlink planted at the checkpoint's final path"
    with tempfile.TemporaryDirectory() as directory:
        code, stdout, stderr, _, _, _ = run_watched(case, [program, "symlink_final", "--devices=2",
                                                           f"--dir={directory}"], deadline=60)
        if code != 0 or "target untouched" not in stdout:
            report(case, f"exit {code}:\n{stdout}\n{stderr}")
        else:
            with open(f"{directory}/victim.txt") as file:
                if file.read() != "precious":
                    report(case, "the symlink's target was written")
                else:
                    ok(case, "replaced by the checkpoint; target untouched")


def main():
    groups = {"kill_forward": lambda p: kill_group(p, "forward"),
              "kill_backward": lambda p: kill_group(p, "backward"),
              "kill_save": lambda p: kill_group(p, "save"),
              "rendezvous": rendezvous, "checkpoint_files": checkpoint_files,
              "security": security}
    if len(sys.argv) != 3 or sys.argv[1] not in groups:
        print(__doc__)
        return 2
    program = sys.argv[2]
    if not os.access(program, os.X_OK):
        print(f"ERROR: {program} is not an executable")
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("ERROR: PR_SET_CHILD_SUBREAPER failed: exit codes of orphaned ranks cannot be checked")
        return 1
    groups[sys.argv[1]](program)
    print(f"{len(passed)} case(s) passed, {len(problems)} problem(s)")
    return 1 if problems or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
