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

  launch_driver.py fabric_run FABRIC_RUN PROGRAM
      fabric-run starts 2 ranks that train and agree; a failing rank's exit
      code is fabric-run's, with no process left; argv reaches every rank
      verbatim (spaces, quotes, $(...), globs, empty strings) with the
      torchrun environment and the LT_* overrides.
  launch_driver.py checkpoint PROGRAM
      fabric::State checks on 2 ranks; exact resume (8 steps = 4, save, load
      in a fresh job, 4) bit for bit; rank 0 killed with SIGKILL between
      writing the temporary file and renaming it leaves the previous
      checkpoint loadable.

  launch_driver.py loggers PROGRAM
      2 ranks log to a CSV and a TensorBoard logger: one header, rank 0's
      rows only, version_0 then version_1 on a second run; the event file
      decodes (TFRecord framing, masked CRC32C, Event protobuf) to exactly
      the logged scalars, and `protoc --decode_raw` agrees where installed.

  launch_driver.py zero_checkpoint PROGRAM
      Under "zero2" on 2 ranks: 8 steps = 4, save, load in a fresh job, 4,
      bit for bit; the losses match a "ddp" run to float tolerance; a "ddp"
      job resumes from the zero2 checkpoint (same file format) with the
      same losses.
  launch_driver.py fsdp_checkpoint PROGRAM
      The same under "fsdp", and the checkpoint saved on 2 ranks loaded on 1
      and on 4 (the set-up model equals a plain model loaded from the file,
      the optimizer shards add up to its state, training goes on), and the
      trained model exported to one file that plain torch::load reads.
  launch_driver.py timeout PROGRAM
      Rank 1 sleeps instead of joining an all-reduce: rank 0 fails after the
      configured 2 s collective timeout with a message that says so, and the
      whole job ends within a few seconds more.

  launch_driver.py divergence PROGRAM
  launch_driver.py divergence_external PROGRAM FABRIC_RUN
      One rank leaves the training loop early (a stop condition that differs
      per rank) while the others go on into the next backward: started by
      Fabric's launcher (rank 1 early, rank 0 early, 3 ranks), or
      torchrun-style (rank 1 early, rank 0 early) and by fabric-run, the job
      must end within 10 s, every rank non-zero, with one message naming
      both ranks, their step counts and the likely cause, and no process
      left.
  launch_driver.py paths PROGRAM
  launch_driver.py paths_external PROGRAM FABRIC_RUN
      Ranks take different paths and enter different collectives while all
      of them still run: one all-reduces a scalar after leaving its loop
      while the others are in backward (Gloo: data of another size), one
      enters a barrier, one broadcasts where the others all-reduce 5 values,
      one `continue`s past a backward. Fabric's launcher (2 and 3 ranks),
      torchrun-style and fabric-run: the job must end within 10 s, every
      rank non-zero, with one message naming every rank, the call it is in
      and its step count, and the advice; no abort text, no process left.
  launch_driver.py late_work PROGRAM
      Rank 0 working alone for 5 s after the others finished is not a
      divergence: that job succeeds (launcher and torchrun-style). A rank
      killed during such work, torchrun-style, does not leave the finished
      rank waiting forever.
  launch_driver.py warnings PROGRAM
      2 ranks train a model that was never set up: rank 0 warns once about
      fabric.backward and once about fabric.step; set up, or on 1 rank,
      nothing is printed. The same for an optimizer over parameters of no
      set-up model (never set up: both warnings); set up with
      fabric.setup_optimizer: one note that their modules' buffers are not
      broadcast, no warning.
  launch_driver.py sync_check PROGRAM
      FABRIC_CHECK_SYNC=1: a job in sync (ddp, zero2; 1 and 2 ranks) prints
      "fabric: sync check passed: ..." once; a rank that changes a parameter
      behind the Fabric's back ends the job with the step, the parameter and
      the ranks. By default (unset or empty): silent in sync (ddp, zero2); the
      change is found at the next sampled check or when the Fabric ends,
      non-zero. FABRIC_CHECK_SYNC=0/off: nothing; an unknown value: an error
      listing the valid ones.
  launch_driver.py unused_first PROGRAM
      A head the first backward reaches on no rank (ddp, zero1, option
      unchosen): trained in sync, one note; ..._false or ranks that disagree:
      the job stops naming them.
  launch_driver.py replaced PROGRAM
      Parameters replaced after fabric.setup() (torch::load, Module::load with
      the optimizer's load, ->to(kDouble), a teacher copied alike), default
      sync check: 2 ranks equal the 1-process resume (ddp, zero2); a load on
      rank 0 only, per-rank copies, and fsdp stop with the cause.
  launch_driver.py unused_uncaught PROGRAM
      A head left unused on every rank, or on rank 1 only, under ddp without
      find_unused_parameters, and the program does not catch the error:
      with FABRIC_CHECK_SYNC=1 the job ends within 15 s, non-zero, with the
      message naming head2.weight and head2.bias (from each rank that left
      them unused) and the strategy name that fixes it; the sync check's
      failure never shows, no process is left.
  launch_driver.py load_fresh PROGRAM
      try { fabric.load } catch (const c10::Error&) on 1 and 2 ranks.
  launch_driver.py phases_disagree PROGRAM
      Training phases: rank 1 alone unfreezes a parameter; the job ends
      promptly, non-zero, saying that the set of parameters that require
      grad changed; no process left.
  launch_driver.py stdout_before_launch PROGRAM FABRIC_RUN
      A banner printed before fabric.launch() shows once (2 and 3 ranks,
      launch() and fabric-run); every rank's output after launch shows;
      stderr is untouched; a rank failing before launch is heard.

PROGRAM is fabric_multiprocess_program. Exit status 0 when all cases pass.
"""
import ctypes
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

DEADLINE_S = 15.0
PR_SET_CHILD_SUBREAPER = 36

problems = []


def report(case, message):
    problems.append(f"{case}: {message}")
    print(f"FAIL {case}: {message}", flush=True)


def alive(pid):
    """True for a process that exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def processes_with_argument(argument):
    """pids of live (non-zombie) processes whose argv contains `argument`."""
    wanted = argument.encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                arguments = cmdline.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as stat:
                state = stat.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if wanted in arguments and state != b"Z":
            pids.append(int(entry))
    return pids


def output_relays():
    """pids of the launcher's output relays (a fork of a rank that retitles
    itself at once: see runtime/src/launchers/output_relay.h)."""
    pids = set()
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/comm", "rb") as comm:
                if comm.read().strip() == b"fabric-relay":
                    pids.add(int(entry))
        except (OSError, ValueError):
            continue
    return pids


class ProcessRecorder(threading.Thread):
    """Remembers every process that carries the marker while the job runs,
    and apart from them the output relays (which carry it only for the
    moment between their fork and their new title)."""

    def __init__(self, marker):
        super().__init__(daemon=True)
        self.marker = marker
        self.seen = set()
        self.relays = set()
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            marked = set(processes_with_argument(self.marker))
            self.relays.update(output_relays() & (marked | self.seen | self.relays | self._children_of(marked)))
            self.seen.update(marked)
            time.sleep(0.02)

    @staticmethod
    def _children_of(parents):
        children = set()
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    parent = int(stat.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if parent in parents:
                children.add(int(entry))
        return children

    def ranks(self):
        return self.seen - self.relays


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
    children = recorder.ranks() - {job.pid}
    orphan_codes = reap_orphans(children, start + DEADLINE_S + 5)
    reap_orphans(recorder.relays, start + DEADLINE_S + 5)
    elapsed = time.monotonic() - start
    stderr = stderr.decode(errors="replace")
    stdout = stdout.decode(errors="replace")

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
    if fail_step >= 0:
        # The failing rank's last words, on both streams, prefixed with its
        # rank (none for rank 0), and delivered before the launcher's line
        # about its end, even when it aborts or is killed right after.
        prefix = f"[rank {fail_rank}] " if fail_rank != 0 else ""
        said = f"{prefix}test: rank {fail_rank} fails now ({how})"
        lines = stderr.splitlines()
        if said not in lines:
            report(case, f"stderr lacks the line {said!r}; stderr was:\n{stderr}")
        elif fail_rank != 0:
            ending = [i for i, line in enumerate(lines) if re.match(rf"^fabric: rank {fail_rank} \(pid", line)]
            if ending and ending[0] < lines.index(said):
                report(case, f"rank {fail_rank}'s last line came after the launcher's line on its end:\n{stderr}")
        reached = f"{prefix}test: rank {fail_rank} reached step {fail_step}"
        if reached not in stdout.splitlines():
            report(case, f"stdout lacks the line {reached!r}; stdout was:\n{stdout}")
    for match in re.finditer(r"rank \d+ \(pid (\d+)\)", stderr):
        if int(match.group(1)) not in recorder.seen:
            report(case, f"the message names pid {match.group(1)}, which is not a process of the job")
    # Every rank but 0 had its output relay (each line prefixed with its rank).
    if len(recorder.relays) != devices - 1:
        report(case, f"saw {len(recorder.relays)} output relays, expected {devices - 1}")
    leftovers = processes_with_argument(marker) + [
        pid for pid in children | recorder.relays if alive(pid)]
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
    run_failure_case(program, "2 ranks, rank 1 aborts", 2, 1, 3, "abort", [
        r"^fabric: rank 1 \(pid \d+\) was killed by signal 6 \(Aborted\); stopping all ranks$"])
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


def joined_job(case, program, env_of_rank, world=2, arguments=(), joined=True):
    """Starts `world` ranks the way a cluster launcher does (each with its
    own environment), runs the ddp scenario, and checks that they formed one
    job: rank 0 alone prints the result. A rank that failed to read its
    environment would launch a job of its own, and both would print (what
    `joined=False` expects). Returns the ranks' standard errors."""
    ranks = [subprocess.Popen([program, "ddp", f"--devices={world}", *arguments], env=env_of_rank(r),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for r in range(world)]
    outputs = []
    errors = []
    for r, process in enumerate(ranks):
        try:
            stdout, stderr = process.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            for other in ranks:
                other.kill()
            stdout, stderr = process.communicate()
            report(case, f"rank {r} did not finish within 90 s")
        outputs.append(stdout.decode(errors="replace"))
        errors.append(stderr.decode(errors="replace"))
        if process.returncode != 0:
            report(case, f"rank {r} exited with {process.returncode}:\n{errors[-1]}")
    passed = f"ddp checks passed on {world} ranks"
    if outputs[0].count(passed) != 1:
        report(case, f"rank 0 did not print '{passed}' once: {outputs[0]!r}")
    if joined and any(passed in out for out in outputs[1:]):
        report(case, "a rank other than 0 printed through fabric.print (two jobs, not one?)")
    if not joined and not all(out.count(passed) == 1 for out in outputs):
        report(case, f"expected every process to run a job of its own: {outputs!r}")
    return errors


def torchrun(program):
    world = 2
    base = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world), GROUP_RANK="0")
    joined_job("torchrun", program, lambda r: dict(base, RANK=str(r), LOCAL_RANK=str(r)), world)


def cluster_envs(program):
    """SLURM (srun's variables; the store's host is the node list's first
    host and its port comes from the job id, as Lightning does) and Open MPI
    (mpirun's OMPI_COMM_WORLD_* variables)."""
    world = 2
    # SLURM: port 10000 + the job id's last 4 digits; pick a job id whose port is free.
    port = next(p for p in range(10000 + os.getpid() % 9000, 20000) if port_is_free(p))
    slurm = dict(os.environ, SLURM_NTASKS=str(world), SLURM_NNODES="1", SLURM_NODEID="0",
                 SLURM_NTASKS_PER_NODE=str(world), SLURM_NODELIST="127.0.0.1",
                 SLURM_JOB_ID=f"7{port - 10000:04d}", SLURM_JOB_NAME="train", MASTER_ADDR="",
                 MASTER_PORT="")
    joined_job("slurm", program, lambda r: dict(slurm, SLURM_PROCID=str(r), SLURM_LOCALID=str(r)), world)
    mpi = dict(os.environ, OMPI_COMM_WORLD_SIZE=str(world), OMPI_COMM_WORLD_LOCAL_SIZE=str(world),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    joined_job("openmpi", program,
               lambda r: dict(mpi, OMPI_COMM_WORLD_RANK=str(r), OMPI_COMM_WORLD_LOCAL_RANK=str(r)), world)
    # An interactive SLURM allocation (salloc's shell) did not start the ranks:
    # not joined; the program launches its own job and succeeds alone.
    code, out, err = run_job("slurm-interactive", [program, "ddp", "--devices=2"],
                             env=dict(slurm, SLURM_PROCID="0", SLURM_LOCALID="0", SLURM_JOB_NAME="bash"))
    if code != 0 or out.count("ddp checks passed on 2 ranks") != 1:
        report("slurm-interactive", f"exit {code}, output {out!r}, stderr {err[-2000:]!r}")
    program_environment(program, world)


def program_environment(program, world):
    """A cluster environment the program brings (Options::cluster_environment,
    the test program's HydraEnvironment: MPICH Hydra's PMI_RANK/PMI_SIZE)."""
    hydra = dict(os.environ, PMI_SIZE=str(world), MPI_LOCALNRANKS=str(world), MASTER_ADDR="127.0.0.1",
                 MASTER_PORT=str(free_port()))
    of_rank = lambda r: dict(hydra, PMI_RANK=str(r), MPI_LOCALRANKID=str(r))
    joined_job("hydra", program, of_rank, world, arguments=["--environment=hydra"])
    # The control: without the program's environment no rank knows Hydra's
    # variables, and each process starts a job of its own (on a port of its
    # own: MASTER_PORT unset).
    joined_job("hydra-not-given", program,
               lambda r: {k: v for k, v in of_rank(r).items() if k != "MASTER_PORT"}, world, joined=False)
    # A placement that cannot be (rank 2 of 2) is refused, naming the environment.
    code, out, err = run_job("hydra-inconsistent", [program, "ddp", "--devices=2", "--environment=hydra"],
                             env=dict(hydra, PMI_RANK="2", MPI_LOCALRANKID="0"))
    if code == 0 or "inconsistent hydra environment: rank 2, world size 2" not in err:
        report("hydra-inconsistent", f"exit {code}, stderr {err[-2000:]!r}")
    # Given but detecting nothing: said once (rank 0; the ranks Fabric starts
    # are placed by its launcher), and the program starts its job itself.
    code, out, err = run_job("hydra-absent", [program, "ddp", "--devices=2", "--environment=hydra"],
                             env={k: v for k, v in os.environ.items() if not k.startswith("PMI_")})
    said = "cluster environment 'hydra' (Options::cluster_environment) detected nothing"
    if code != 0 or out.count("ddp checks passed on 2 ranks") != 1 or err.count(said) != 1:
        report("hydra-absent", f"exit {code}, output {out!r}, stderr {err[-2000:]!r}")


def port_is_free(port):
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def run_job(case, command, timeout=90, **kwargs):
    """Runs a job to its end; returns (exit code, stdout, stderr)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        report(case, f"did not finish within {timeout} s")
        process.kill()
        stdout, stderr = process.communicate()
    return process.returncode, stdout.decode(errors="replace"), stderr.decode(errors="replace")


def fabric_run(launcher, program):

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    # 2 ranks train and agree (the full ddp checks).
    code, stdout, stderr = run_job("fabric-run ddp", [launcher, "--devices", "2", "--accelerator",
                                                      "cpu", program, "ddp", "--devices=2"])
    if code != 0:
        report("fabric-run ddp", f"exit code {code}:\n{stderr}")
    if stdout.count("ddp checks passed on 2 ranks") != 1:
        report("fabric-run ddp", f"rank 0 did not report the checks once: {stdout!r}")

    # Two "nodes" on this machine: one fabric-run per node, one rank each,
    # meeting in a barrier.
    port = str(free_port())
    with tempfile.TemporaryDirectory() as directory:
        nodes = [subprocess.Popen([launcher, "--devices", "1", "--num-nodes", "2", "--node-rank",
                                   str(node), "--main-address", "127.0.0.1", "--main-port", port,
                                   program, "argv", directory],
                                  env=dict(os.environ, GLOO_SOCKET_IFNAME="lo"),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for node in range(2)]
        for node, process in enumerate(nodes):
            try:
                _, stderr = process.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                for other in nodes:
                    other.kill()
                _, stderr = process.communicate()
            if process.returncode != 0:
                report("fabric-run 2 nodes", f"node {node} exited with {process.returncode}:\n"
                                             f"{stderr.decode(errors='replace')}")
                continue
            with open(f"{directory}/rank{node}.env") as file:
                env = dict(line.rstrip("\n").split("=", 1) for line in file)
            expected = {"RANK": str(node), "LOCAL_RANK": "0", "WORLD_SIZE": "2",
                        "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": str(node), "NODE_RANK": str(node),
                        "MASTER_PORT": port, "LT_NUM_NODES": "2", "world_size()": "2"}
            for name, value in expected.items():
                if env.get(name) != value:
                    report("fabric-run 2 nodes", f"node {node}: {name}={env.get(name)!r}, "
                                                 f"expected {value!r}")

    # A failing rank: its code is fabric-run's, the other rank is stopped,
    # nothing is left behind.
    marker = f"--marker={uuid.uuid4().hex}"
    recorder = ProcessRecorder(marker)
    recorder.start()
    start = time.monotonic()
    code, stdout, stderr = run_job("fabric-run failure", [
        launcher, "--devices=2", program, "fail", "--devices=2", "--fail-rank=1", "--fail-step=3",
        "--fail-how=exit", marker], timeout=DEADLINE_S)
    elapsed = time.monotonic() - start
    recorder.stopping.set()
    recorder.join()
    reap_orphans(recorder.seen, time.monotonic() + 5)
    print(f"--- fabric-run failure: {elapsed:.2f} s, exit {code}")
    if code != 3:
        report("fabric-run failure", f"exit code {code}, expected rank 1's 3; stderr:\n{stderr}")
    if not re.search(r"^fabric: rank 1 \(pid \d+\) exited with code 3; stopping all ranks$",
                     stderr, re.MULTILINE):
        report("fabric-run failure", f"stderr does not name rank 1:\n{stderr}")
    if len(recorder.ranks()) != 3:  # fabric-run carries the marker too
        report("fabric-run failure", f"saw {len(recorder.ranks())} processes, expected fabric-run "
                                     "and 2 ranks")
    if len(recorder.relays) != 1:  # rank 1's output relay (fabric-run's rank 0 has none)
        report("fabric-run failure", f"saw {len(recorder.relays)} output relays, expected 1")
    leftovers = processes_with_argument(marker)
    if leftovers:
        report("fabric-run failure", f"processes left behind: {leftovers}")
        for pid in leftovers:
            os.kill(pid, 9)

    # SIGTERM to fabric-run (a scheduler ending the job) reaches the ranks;
    # the job ends with 128 + 15 (a signal's code, as a shell reports it)
    # and leaves nothing behind.
    marker = f"--marker={uuid.uuid4().hex}"
    job = subprocess.Popen([launcher, "--devices", "2", program, "fail", "--devices=2",
                            "--fail-rank=-5", "--steps=100000", marker],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while len(processes_with_argument(marker)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # into training
    job.send_signal(15)
    try:
        _, stderr = job.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        job.kill()
        _, stderr = job.communicate()
        report("fabric-run sigterm", "fabric-run did not end after SIGTERM")
    stderr = stderr.decode(errors="replace")
    time.sleep(0.2)
    leftovers = processes_with_argument(marker)
    if job.returncode != 128 + 15 or "was killed by signal 15" not in stderr or leftovers:
        report("fabric-run sigterm", f"exit {job.returncode} (expected 143), leftovers "
                                     f"{leftovers}, stderr:\n{stderr}")
        for pid in leftovers:
            os.kill(pid, 9)

    # argv verbatim, environment.
    awkward = ["two words", "it's", '"quoted"', "$(touch /tmp/fabric_run_injected)", "*", "",
               "back\\slash", "--devices=9", "tab\there", "ünï"]
    with tempfile.TemporaryDirectory() as directory:
        code, _, stderr = run_job("fabric-run argv", [
            launcher, "--devices", "2", "--accelerator", "cpu", "--strategy", "ddp",
            "--precision", "32-true", program, "argv", directory] + awkward)
        if code != 0:
            report("fabric-run argv", f"exit code {code}:\n{stderr}")
        else:
            for rank in range(2):
                with open(f"{directory}/rank{rank}.argv", "rb") as file:
                    received = file.read().decode().split("\0")[:-1]
                if received != awkward:
                    report("fabric-run argv", f"rank {rank} got {received!r}, expected {awkward!r}")
                with open(f"{directory}/rank{rank}.env") as file:
                    env = dict(line.rstrip("\n").split("=", 1) for line in file)
                expected = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
                            "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0", "NODE_RANK": "0",
                            "MASTER_ADDR": "127.0.0.1", "LT_ACCELERATOR": "cpu", "LT_DEVICES": "2",
                            "LT_STRATEGY": "ddp", "LT_PRECISION": "32-true", "LT_NUM_NODES": "1",
                            "world_size()": "2"}
                for name, value in expected.items():
                    if env.get(name) != value:
                        report("fabric-run argv", f"rank {rank}: {name}={env.get(name)!r}, "
                                                  f"expected {value!r}")
                if not env.get("MASTER_PORT", "").isdigit():
                    report("fabric-run argv", f"rank {rank}: MASTER_PORT={env.get('MASTER_PORT')!r}")
    if os.path.exists("/tmp/fabric_run_injected"):
        os.remove("/tmp/fabric_run_injected")
        report("fabric-run argv", "an argument was run by a shell")

    # Bad options fail before anything starts, with the valid values.
    code, _, stderr = run_job("fabric-run typo", [launcher, "--strategy", "fspd", program, "ddp"])
    if code != 2 or "did you mean 'fsdp'" not in stderr:
        report("fabric-run typo", f"exit code {code}, stderr:\n{stderr}")
    code, _, stderr = run_job("fabric-run missing", [launcher, "--devices", "2",
                                                     "/nonexistent/program"])
    if code == 0 or "cannot execute" not in stderr:
        report("fabric-run missing", f"exit code {code}, stderr:\n{stderr}")


def checkpoint(program):
    with tempfile.TemporaryDirectory() as directory:
        code, stdout, stderr = run_job("state", [program, "state", "--devices=2",
                                                 f"--dir={directory}"])
        if code != 0 or "state checks passed on 2 ranks" not in stdout:
            report("state", f"exit code {code}:\n{stdout}\n{stderr}")

    with tempfile.TemporaryDirectory() as directory:
        runs = {}
        for phase in ("full", "first", "second"):
            code, stdout, stderr = run_job(f"resume {phase}", [
                program, "resume", "--devices=2", f"--dir={directory}", f"--phase={phase}"])
            if code != 0:
                report(f"resume {phase}", f"exit code {code}:\n{stderr}")
            runs[phase] = [line for line in stdout.splitlines() if line.startswith("step ")]
        resumed = runs["first"] + runs["second"]
        if len(runs["full"]) != 8 or resumed != runs["full"]:
            report("resume", f"losses differ:\n full:    {runs['full']}\n resumed: {resumed}")
        else:
            print(f"resume: 8 losses identical bit for bit, last {runs['full'][-1]}")

    with tempfile.TemporaryDirectory() as directory:
        job = subprocess.Popen([program, "save_twice", "--devices=2", f"--dir={directory}"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # Wait for the pause between writing the temporary file and renaming.
        deadline = time.monotonic() + 60
        seen = b""
        while b"test hook: pausing" not in seen and time.monotonic() < deadline:
            line = job.stderr.readline()
            if not line:
                break
            seen += line
        if b"test hook: pausing" not in seen:
            report("kill during save", f"the save never paused: {seen!r}")
        temporary = f"{directory}/twice.ckpt.tmp"
        if not os.path.exists(temporary):
            report("kill during save", "no temporary file while the save pauses")
        job.kill()  # rank 0, SIGKILL: its children see EOF and stop
        job.communicate(timeout=30)
        code, stdout, stderr = run_job("load after kill", [program, "load_step",
                                                           f"--dir={directory}"])
        if code != 0 or "loaded step 1" not in stdout:
            report("kill during save", f"the previous checkpoint is not loadable (exit {code}):"
                                       f"\n{stdout}\n{stderr}")
        else:
            print("kill during save: the previous checkpoint (step 1) loads")


def resume_losses(case, program, directory, strategy, phase, devices=2):
    code, stdout, stderr = run_job(case, [program, "resume", f"--devices={devices}", f"--dir={directory}",
                                          f"--phase={phase}", f"--strategy={strategy}"])
    if code != 0:
        report(case, f"exit code {code}:\n{stderr}")
    return [line for line in stdout.splitlines() if line.startswith("step ")]


def loss_values(lines):
    return [float.fromhex(line.split()[-1]) for line in lines]


def zero_checkpoint(program, strategy="zero2"):
    with tempfile.TemporaryDirectory() as directory:
        full = resume_losses(f"{strategy} full", program, directory, strategy, "full")
        first = resume_losses(f"{strategy} first", program, directory, strategy, "first")
        second = resume_losses(f"{strategy} second", program, directory, strategy, "second")
        # The checkpoint (written by "first") resumed under ddp.
        ddp_second = resume_losses(f"ddp from {strategy}", program, directory, "ddp", "second")
        if strategy == "fsdp":
            # Saved on 2 ranks, loaded on 1 and on 4 (other owners, other
            # units' shards), and exported for plain torch::load.
            for devices in (1, 4):
                if not resume_losses(f"fsdp reload on {devices}", program, directory, "fsdp", "reload", devices):
                    report(f"fsdp reload on {devices}", "it trained no step after loading")
    with tempfile.TemporaryDirectory() as directory:
        ddp_full = resume_losses("ddp full", program, directory, "ddp", "full")
    if len(full) != 8 or first + second != full:
        report(f"{strategy} resume", f"losses differ:\n full:    {full}\n resumed: {first + second}")
    else:
        print(f"{strategy} resume: 8 losses identical bit for bit, last {full[-1]}")

    def close(case, left, right):
        if len(left) != len(right) or not left:
            report(case, f"different numbers of losses: {left} / {right}")
            return
        worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(loss_values(left),
                                                                   loss_values(right)))
        if worst > 1e-5:
            report(case, f"relative difference {worst:.2e}:\n {left}\n {right}")
        else:
            print(f"{case}: {len(left)} losses agree (largest relative difference {worst:.1e})")

    close(f"{strategy} vs ddp, 8 Adam steps", full, ddp_full)
    close(f"ddp resumed from a {strategy} checkpoint", first + ddp_second, full)


def collective_timeout(program):
    command = [program, "hang", "--devices=2", "--timeout-ms=2000"]
    start = time.monotonic()
    code, stdout, stderr = run_job("timeout", command, timeout=40)
    elapsed = time.monotonic() - start
    print(f"--- timeout: {elapsed:.2f} s, exit {code}")
    print("\n".join("    " + line for line in stderr.splitlines() if "fabric" in line or "test:" in line))
    expected = (r"fabric: fabric\.all_reduce\(\) on rank 0 timed out after 2000 ms "
                r"\(Options::timeout\): another rank did not join it in time")
    if code == 0:
        report("timeout", "the job exited with code 0")
    if not re.search(expected, stderr):
        report("timeout", f"stderr lacks /{expected}/:\n{stderr}")
    # 2 s of timeout, process start-up and the stop of rank 1.
    if elapsed > 12:
        report("timeout", f"the job took {elapsed:.1f} s to end with a 2 s timeout")


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_varint(data, position):
    value, shift = 0, 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def decode_fields(data):
    """protobuf message -> list of (field, wire type, value)."""
    import struct
    fields, position = [], 0
    while position < len(data):
        key, position = read_varint(data, position)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, position = read_varint(data, position)
        elif wire == 1:
            value = struct.unpack_from("<d", data, position)[0]
            position += 8
        elif wire == 2:
            length, position = read_varint(data, position)
            value = data[position:position + length]
            position += length
        elif wire == 5:
            value = struct.unpack_from("<f", data, position)[0]
            position += 4
        else:
            raise ValueError(f"wire type {wire}")
        fields.append((field, wire, value))
    return fields


def read_events(path):
    """Records of a tfevents file, CRCs checked; raises on any defect."""
    import struct
    with open(path, "rb") as file:
        data = file.read()
    events, position = [], 0
    while position < len(data):
        header = data[position:position + 8]
        length = struct.unpack("<Q", header)[0]
        length_crc = struct.unpack_from("<I", data, position + 8)[0]
        if length_crc != masked_crc32c(header):
            raise ValueError(f"bad length CRC at byte {position}")
        event = data[position + 12:position + 12 + length]
        data_crc = struct.unpack_from("<I", data, position + 12 + length)[0]
        if data_crc != masked_crc32c(event):
            raise ValueError(f"bad data CRC at byte {position}")
        events.append(event)
        position += 12 + length + 4
    return events


def loggers(program):
    import csv
    import glob
    import shutil
    import tempfile

    expected_scalars = []
    for step in range(3):
        expected_scalars.append((step, "loss", 1.5 + step))
        expected_scalars += [(step, "acc", 0.25 + step), (step, "lr", 0.125)]
    expected_scalars.append((10, "loss", 9.0))
    with tempfile.TemporaryDirectory() as directory:
        for devices in (2, 1):  # the second run (one rank is enough) gets version_1
            code, stdout, stderr = run_job("loggers", [program, "log", f"--devices={devices}",
                                                       f"--dir={directory}"])
            if code != 0:
                report("loggers", f"exit code {code}:\n{stderr}")
                return
        for kind in ("csv", "tb"):
            versions = sorted(os.listdir(f"{directory}/{kind}"))
            if versions != ["version_0", "version_1"]:
                report("loggers", f"{kind}: versions {versions}, expected version_0 and version_1")
        with open(f"{directory}/csv/version_0/metrics.csv") as file:
            lines = file.read().splitlines()
        rows = list(csv.DictReader(lines))
        if lines[0] != "step,loss,acc,lr" or sum(line.startswith("step") for line in lines) != 1:
            report("csv", f"header: {lines!r}")
        got = [(int(row["step"]), name, float(row[name])) for row in rows
               for name in ("loss", "acc", "lr") if row[name] != ""]
        if got != expected_scalars:
            report("csv", f"rows {got} != rank 0's {expected_scalars}")

        files = glob.glob(f"{directory}/tb/version_0/events.out.tfevents.*")
        if len(files) != 1:
            report("tensorboard", f"event files: {files}")
            return
        try:
            events = [decode_fields(event) for event in read_events(files[0])]
        except Exception as error:  # noqa: BLE001 - any defect fails the case
            report("tensorboard", f"cannot decode {files[0]}: {error}")
            return
        first = {field: value for field, _, value in events[0]}
        if first.get(3) != b"brain.Event:2" or not isinstance(first.get(1), float):
            report("tensorboard", f"the first event is not file_version: {events[0]}")
        scalars = []
        for event in events[1:]:
            fields = {field: value for field, _, value in event}
            summary = decode_fields(fields[5])
            for _, _, summary_value in summary:
                value_fields = {field: value for field, _, value in decode_fields(summary_value)}
                scalars.append((fields.get(2, 0), value_fields[1].decode(), value_fields[2]))
        if scalars != expected_scalars:
            report("tensorboard", f"scalars {scalars} != {expected_scalars}")
        else:
            print(f"tensorboard: {len(events)} records, CRCs valid, scalars as logged")

        # TensorBoard's own reader (issue 41 point 4), where a Python with the
        # tensorboard package is named: the LibTorch 2.x step's environment
        # (scripts/test_libtorch2.sh).
        reader_python = os.environ.get("FABRIC_TENSORBOARD_PYTHON")
        if not reader_python:
            print("tensorboard: TensorBoard's own reader not run here (FABRIC_TENSORBOARD_PYTHON unset; "
                  "scripts/test_libtorch2.sh runs it)")
        else:
            reader = subprocess.run([reader_python, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                 "tensorboard_reader.py"),
                                     f"{directory}/tb/version_0"], capture_output=True, text=True)
            wanted = {}
            for step, tag, value in expected_scalars:
                wanted.setdefault(tag, []).append([step, value])
            if reader.returncode != 0:
                report("tensorboard", f"TensorBoard's reader exited {reader.returncode}: {reader.stderr}")
            elif json.loads(reader.stdout) != wanted:
                report("tensorboard", f"TensorBoard's reader read {reader.stdout.strip()}, logged {wanted}")
            else:
                print(f"tensorboard: TensorBoard's own reader (event_accumulator) reads the tags, steps and "
                      f"values as logged: {reader.stdout.strip()}")

        protoc = shutil.which("protoc")
        if protoc is None:
            print("protoc not installed: the --decode_raw cross-check is skipped")
        else:
            for event in read_events(files[0])[:2]:
                decoded = subprocess.run([protoc, "--decode_raw"], input=event,
                                         capture_output=True)
                text = decoded.stdout.decode()
                if decoded.returncode != 0 or ("brain.Event:2" not in text and
                                               '1: "loss"' not in text):
                    report("tensorboard", f"protoc --decode_raw: {decoded.returncode} {text!r} "
                                          f"{decoded.stderr!r}")
            print("protoc --decode_raw agrees")


# ---- ranks that leave training at different steps -----------------------------

DIVERGENCE_LIMIT_S = 10.0


def run_marked_job(case, commands, envs, deadline):
    """Starts one process per command (a launcher's rank 0, or every rank
    torchrun-style), all tagged with a marker; waits for every process of the
    job (re-exec'd ranks included) to end. Returns (elapsed, exit codes of
    the started processes, stdout, stderr, leftover pids)."""
    marker = f"--marker={uuid.uuid4().hex}"
    recorder = ProcessRecorder(marker)
    start = time.monotonic()
    processes = [subprocess.Popen(command + [marker], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE) for command, env in zip(commands, envs)]
    recorder.start()
    outputs = [b""] * len(processes)
    errors = [b""] * len(processes)
    results = {}

    def collect(index, process):
        outputs[index], errors[index] = process.communicate()

    readers = [threading.Thread(target=collect, args=(i, p), daemon=True)
               for i, p in enumerate(processes)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(max(0.0, start + deadline - time.monotonic()))
    if any(reader.is_alive() for reader in readers):
        report(case, f"the job did not end within {deadline} s")
        for pid in processes_with_argument(marker):
            os.kill(pid, 9)
        for reader in readers:
            reader.join()
    elapsed = time.monotonic() - start
    # Every process of the job has closed its pipes; re-parented ones are reaped here.
    deadline_reap = time.monotonic() + 5
    while processes_with_argument(marker) and time.monotonic() < deadline_reap:
        time.sleep(0.02)
    recorder.stopping.set()
    recorder.join()
    reap_orphans(recorder.seen - {p.pid for p in processes}, time.monotonic() + 2)
    leftovers = processes_with_argument(marker)
    for pid in leftovers:
        os.kill(pid, 9)
    for index, process in enumerate(processes):
        results[index] = process.returncode
    stdout = "".join(o.decode(errors="replace") for o in outputs)
    stderr = "".join(e.decode(errors="replace") for e in errors)
    return elapsed, results, stdout, stderr, leftovers


def torchrun_environments(world):
    base = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world), GROUP_RANK="0")
    return [dict(base, RANK=str(r), LOCAL_RANK=str(r)) for r in range(world)]


def divergence_case(program, launcher, how, world, stop_rank, stop_step, collective=None):
    case = f"{how}, {world} ranks, rank {stop_rank} leaves the loop after step {stop_step}"
    arguments = ["diverge", f"--devices={world}", f"--stop-rank={stop_rank}",
                 f"--stop-step={stop_step}"]
    directory = tempfile.TemporaryDirectory()
    if collective:
        case += f", the others wait in {collective}"
        arguments += [f"--collective={collective}", f"--dir={directory.name}"]
    if how == "torchrun":
        commands = [[program] + arguments] * world
        envs = torchrun_environments(world)
    elif how == "fabric-run":
        commands = [[launcher, f"--devices={world}", program] + arguments]
        envs = [os.environ]
    else:
        commands = [[program] + arguments]
        envs = [os.environ]
    with directory:
        elapsed, codes, _, stderr, leftovers = run_marked_job(case, commands, envs,
                                                              DIVERGENCE_LIMIT_S + 20)
    print(f"--- {case}: ended in {elapsed:.2f} s, exit codes {codes}")
    print("\n".join("    " + line[:200] for line in stderr.splitlines() if "fabric" in line))
    if elapsed > DIVERGENCE_LIMIT_S:
        report(case, f"took {elapsed:.1f} s (limit {DIVERGENCE_LIMIT_S} s)")
    for index, code in codes.items():
        if code == 0 or code is None:
            report(case, f"process {index} exited with {code}")
    if leftovers:
        report(case, f"processes left behind: {leftovers}")
    finished_steps = stop_step + 1
    stuck = r"\d+"
    waits_in = re.escape({"barrier": 'fabric.barrier("end of step")'}.get(
        collective, f"fabric.{collective or 'backward'}()"))
    expected = (rf"^fabric: the ranks left the training loop at different steps: rank {stop_rank} "
                rf"finished the job \(its Fabric was destroyed\) after {finished_steps} steps, while "
                rf"rank ({stuck}), in its step {finished_steps + 1}, waits in {waits_in} for "
                rf"it to join, which will never happen\. The likely cause is a stop condition that "
                rf"differs per rank, such as `if \(loss < x\) break;`.*all-reduce that value first")
    matches = re.findall(expected, stderr, re.MULTILINE)
    if len(matches) != 1 or int(matches[0]) == stop_rank:
        report(case, f"expected one message /{expected}/; stderr:\n{stderr}")
    # Every rank says why it stops (the reporter, the others in one line each).
    for rank in range(world):
        said = (re.search(rf"^fabric: rank {rank}: stopping", stderr, re.MULTILINE) or
                (matches and int(matches[0]) == rank) or
                re.search(rf"^fabric: rank {rank} \(pid \d+\) exited with code 1", stderr, re.MULTILINE))
        if not said:
            report(case, f"rank {rank} did not say why it stopped:\n{stderr}")
    if "Traceback" in stderr or "terminate called" in stderr:
        report(case, f"crashed:\n{stderr}")


def late_work_case(program, how):
    case = f"{how}: rank 0 works alone for 5 s after the others finished"
    arguments = ["late_work", "--devices=2", "--local-work-s=5"]
    if how == "torchrun":
        commands, envs = [[program] + arguments] * 2, torchrun_environments(2)
    else:
        commands, envs = [[program] + arguments], [os.environ]
    elapsed, codes, stdout, stderr, leftovers = run_marked_job(case, commands, envs, 60)
    print(f"--- {case}: {elapsed:.2f} s, exit codes {codes}")
    if any(code != 0 for code in codes.values()):
        report(case, f"exit codes {codes}:\n{stderr}")
    if "late work done" not in stdout or elapsed < 5:
        report(case, f"rank 0 did not finish its work ({elapsed:.1f} s): {stdout!r}\n{stderr}")
    if "fabric: the ranks left" in stderr or "stopping" in stderr or leftovers:
        report(case, f"a false divergence, or leftovers {leftovers}:\n{stderr}")


def become_subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def divergence(program):
    become_subreaper()
    divergence_case(program, None, "launcher", 2, 1, 5)
    divergence_case(program, None, "launcher", 2, 0, 5)
    divergence_case(program, None, "launcher", 3, 2, 3)
    # Every collective, not only the gradient all-reduce.
    for collective in ("barrier", "all_reduce", "save"):
        divergence_case(program, None, "launcher", 2, 1, 2, collective)


def divergence_external(program, launcher):
    become_subreaper()
    divergence_case(program, launcher, "torchrun", 2, 1, 4)
    divergence_case(program, launcher, "torchrun", 2, 0, 4)
    divergence_case(program, launcher, "fabric-run", 2, 1, 2)


# Ranks that take different paths and enter different collectives while all
# of them still run (run_paths in test/runtime/scenarios/job_monitor.cpp): rank R differs at
# step PATH_STEP of PATH_STEPS. Per path: the call rank R is in, the call the
# others are in, and the step counts of both (R's, the others').
PATH_STEP = 3
PATH_STEPS = 8
PATHS = {
    "scalar_after_loop": ("fabric.all_reduce()", "fabric.backward()", PATH_STEP + 1, PATH_STEP + 1),
    "barrier": ('fabric.barrier("rank-local checkpoint")', "fabric.backward()", PATH_STEP, PATH_STEP),
    "broadcast": ("fabric.broadcast()", "fabric.all_reduce()", PATH_STEP + 1, PATH_STEP + 1),
    "skip_backward": ("fabric.all_reduce()", "fabric.backward()", PATH_STEPS - 1, PATH_STEPS - 1),
}


def paths_case(program, launcher, how, world, rank, path):
    case = f"{how}, {world} ranks, rank {rank} takes path {path}"
    arguments = ["paths", f"--devices={world}", f"--path={path}", f"--stop-rank={rank}",
                 f"--stop-step={PATH_STEP}", f"--steps={PATH_STEPS}"]
    if how == "torchrun":
        commands, envs = [[program] + arguments] * world, torchrun_environments(world)
    elif how == "fabric-run":
        commands, envs = [[launcher, f"--devices={world}", program] + arguments], [os.environ]
    else:
        commands, envs = [[program] + arguments], [os.environ]
    elapsed, codes, _, stderr, leftovers = run_marked_job(case, commands, envs,
                                                          DIVERGENCE_LIMIT_S + 20)
    print(f"--- {case}: ended in {elapsed:.2f} s, exit codes {codes}")
    print("\n".join("    " + line[:240] for line in stderr.splitlines() if "fabric" in line))
    if elapsed > DIVERGENCE_LIMIT_S:
        report(case, f"took {elapsed:.1f} s (limit {DIVERGENCE_LIMIT_S} s)")
    for index, code in codes.items():
        if code == 0 or code is None:
            report(case, f"process {index} exited with {code}")
    if leftovers:
        report(case, f"processes left behind: {leftovers}")
    prefix = ("fabric: the ranks took different paths through the program and are in different "
              "collectives, which can never match: ")
    messages = [line for line in stderr.splitlines() if line.startswith(prefix)]
    if len(messages) != 1:
        report(case, f"expected one line starting {prefix!r}; stderr:\n{stderr}")
        return
    message = messages[0]
    own_call, others_call, own_steps, others_steps = PATHS[path]
    for other in range(world):
        call, steps = (own_call, own_steps) if other == rank else (others_call, others_steps)
        # "waits in" or, where Gloo received data of another size, "is in ... where Gloo received".
        expected = (rf"rank {other} (waits|is) in {re.escape(call)} \(collective #\d+\) after "
                    rf"{steps} steps[;.,]")
        if not re.search(expected, message):
            report(case, f"the message does not say /{expected}/:\n{message}")
    for advice in ("all-reduce that value first (`value = fabric.all_reduce(value, "
                   "fabric::ReduceOp::Mean);`)", "fabric-divergent-exit", "`if (loss < x) break;`",
                   "Stopping all ranks."):
        if advice not in message:
            report(case, f"the message lacks {advice!r}:\n{message}")
    # The rank that printed it is named by every other rank's one line.
    stops = re.findall(r"^fabric: rank (\d+): stopping because rank (\d+) found the ranks in "
                       r"different collectives \(see its message\)$", stderr, re.MULTILINE)
    reporters = {int(reporter) for _, reporter in stops}
    stopped = sorted(int(stopping) for stopping, _ in stops)
    if len(reporters) != 1 or stopped != sorted(set(range(world)) - reporters):
        report(case, f"expected one line from every rank but the reporter:\n{stderr}")
    # The story, not an abort: no C++ runtime's or launcher's crash text.
    for crash in ("terminate called", "killed by signal", "Aborted", "core dumped", "Traceback"):
        if crash in stderr:
            report(case, f"{crash!r} in stderr:\n{stderr}")


def paths(program):
    become_subreaper()
    for path in PATHS:
        paths_case(program, None, "launcher", 2, 1, path)
    paths_case(program, None, "launcher", 2, 0, "scalar_after_loop")
    paths_case(program, None, "launcher", 3, 2, "barrier")


def paths_external(program, launcher):
    become_subreaper()
    paths_case(program, launcher, "torchrun", 2, 1, "scalar_after_loop")
    paths_case(program, launcher, "torchrun", 2, 0, "broadcast")
    paths_case(program, launcher, "fabric-run", 2, 1, "skip_backward")


def dead_while_others_wait_case(program):
    """torchrun-style (no launcher watches the ranks): rank 1 is killed during
    local work after rank 0 finished. Rank 0, waiting at the end for it, must
    notice the missing heartbeats and exit non-zero (limit shortened to 3 s)."""
    case = "torchrun: rank 1 killed while rank 0 waits at the end"
    envs = [dict(env, FABRIC_TEST_SILENT_LIMIT_S="3") for env in torchrun_environments(2)]
    command = [program, "late_work", "--devices=2", "--local-work-s=60", "--local-work-rank=1"]
    marker = f"--marker={uuid.uuid4().hex}"
    start = time.monotonic()
    ranks = [subprocess.Popen(command + [marker], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for env in envs]
    deadline = time.monotonic() + 60
    seen = b""
    while b"works alone" not in seen and time.monotonic() < deadline:
        line = ranks[1].stderr.readline()
        if not line:
            break
        seen += line
    time.sleep(0.5)  # rank 0 is in ~Fabric, waiting
    ranks[1].kill()
    try:
        _, stderr = ranks[0].communicate(timeout=20)
    except subprocess.TimeoutExpired:
        ranks[0].kill()
        _, stderr = ranks[0].communicate()
        report(case, "rank 0 still waited 20 s after rank 1 died")
    ranks[1].communicate()
    stderr = stderr.decode(errors="replace")
    elapsed = time.monotonic() - start
    print(f"--- {case}: {elapsed:.2f} s, rank 0 exit {ranks[0].returncode}")
    expected = r"^fabric: rank 0 finished, but rank 1 neither finished nor gave a sign of life for 3 s"
    if ranks[0].returncode in (0, None) or not re.search(expected, stderr, re.MULTILINE):
        report(case, f"rank 0 exit {ranks[0].returncode}, expected /{expected}/:\n{stderr}")
    for pid in processes_with_argument(marker):
        os.kill(pid, 9)
        report(case, f"process {pid} left behind")


def late_work(program):
    become_subreaper()
    late_work_case(program, "launcher")
    late_work_case(program, "torchrun")
    dead_while_others_wait_case(program)


# ---- warnings, sync check, load-or-start-fresh ----------------------------------

def warnings(program):
    backward = "fabric: warning: fabric.backward() runs on 2 processes, but no model was passed to fabric.setup()"
    step = ("fabric: warning: fabric.step() runs on 2 processes, but none of the optimizer's "
            "parameters belongs to a model passed to fabric.setup()")
    code, _, stderr = run_job("not set up", [program, "unsynchronized", "--devices=2", "--setup=0"])
    lines = stderr.splitlines()
    if code != 0:
        report("not set up", f"exit code {code}:\n{stderr}")
    for prefix in (backward, step):
        count = sum(line.startswith(prefix) for line in lines)
        if count != 1:
            report("not set up", f"{count} lines start with {prefix!r} (expected 1, rank 0 once):\n{stderr}")
    if not all("fabric.setup(model, optimizer)" in line and "(Printed once, by rank 0.)" in line
               for line in lines if line.startswith("fabric: warning")):
        report("not set up", f"a warning does not say what to do:\n{stderr}")
    for case, command in (("set up", [program, "unsynchronized", "--devices=2", "--setup=1"]),
                          ("one process", [program, "unsynchronized", "--devices=1", "--setup=0"])):
        code, _, stderr = run_job(case, command)
        if code != 0 or "fabric: warning" in stderr:
            report(case, f"exit code {code}, stderr:\n{stderr}")
    # An optimizer over parameters of no set-up model (a class holding modules
    # made with new): never set up, the same warnings; set up with
    # fabric.setup_optimizer, no warning, and one note on rank 0 saying that
    # the modules' buffers are not broadcast; one process, nothing.
    code, _, stderr = run_job("loose, not set up", [program, "loose", "--devices=2", "--setup=0"])
    lines = stderr.splitlines()
    if code != 0 or any(sum(line.startswith(prefix) for line in lines) != 1
                        for prefix in (backward, step)):
        report("loose, not set up", f"exit code {code}; expected each warning once:\n{stderr}")
    note = "fabric: note: fabric.setup_optimizer(): "
    code, _, stderr = run_job("loose, set up", [program, "loose", "--devices=2"])
    lines = stderr.splitlines()
    notes = [line for line in lines if line.startswith(note)]
    if (code != 0 or "fabric: warning" in stderr or len(notes) != 1
            or "buffers" not in notes[0] or "not broadcast" not in notes[0]
            or "(Printed once, by rank 0.)" not in notes[0]):
        report("loose, set up", f"exit code {code}; expected one note on buffers, no warning:\n{stderr}")
    code, _, stderr = run_job("loose, one process", [program, "loose", "--devices=1"])
    if code != 0 or "fabric: " in stderr:
        report("loose, one process", f"exit code {code}, stderr:\n{stderr}")
    print("warnings: once on rank 0 when not set up, none otherwise")


def sync_check(program):
    on = dict(os.environ, FABRIC_CHECK_SYNC="1")
    for devices, strategy in ((2, "ddp"), (2, "zero2"), (1, "auto")):
        case = f"sync check, {devices} ranks, {strategy}"
        code, _, stderr = run_job(case, [program, "sync", f"--devices={devices}",
                                         f"--strategy={strategy}"], env=on)
        expected = (f"fabric: sync check passed: 6 steps, 4 parameter tensors identical on "
                    f"{devices} ranks")
        if code != 0 or stderr.splitlines().count(expected) != 1:
            report(case, f"exit code {code}; expected the line {expected!r} once:\n{stderr}")
    case = "sync check, rank 1 perturbs a parameter"
    start = time.monotonic()
    code, _, stderr = run_job(case, [program, "sync", "--devices=2", "--perturb-rank=1",
                                     "--perturb-step=3"], timeout=60, env=on)
    elapsed = time.monotonic() - start
    expected = (r"^fabric: sync check \(FABRIC_CHECK_SYNC\) failed after step 4: parameter "
                r"'first\.weight' differs between ranks: rank 0 holds one value and rank 1 another\.")
    if code == 0 or len(re.findall(expected, stderr, re.MULTILINE)) != 1 or "sync check passed" in stderr:
        report(case, f"exit code {code}; expected /{expected}/ once:\n{stderr}")
    else:
        print(f"{case}: the job ended in {elapsed:.1f} s with the message")
    # The default (FABRIC_CHECK_SYNC unset or empty): sampled, silent when the
    # ranks agree; a change after step 3 (checks before backward passes 1
    # and 3, the next due at 7) is found when the Fabric ends, non-zero.
    default = {k: v for k, v in os.environ.items() if k != "FABRIC_CHECK_SYNC"}
    for strategy in ("ddp", "zero2"):
        for env in (default, dict(default, FABRIC_CHECK_SYNC="")):
            case = f"sync check by default, {strategy}, in sync"
            code, _, stderr = run_job(case, [program, "sync", "--devices=2", f"--strategy={strategy}"], env=env)
            if code != 0 or "sync check" in stderr:
                report(case, f"exit code {code}; expected no sync check line:\n{stderr}")
    case = "sync check by default, rank 1 perturbs a parameter after step 3"
    code, _, stderr = run_job(case, [program, "sync", "--devices=2", "--perturb-rank=1", "--perturb-step=3"],
                              timeout=60, env=default)
    expected = (r"^fabric: sync check failed when the Fabric ended \(after 6 backward passes\); it last passed "
                r"before backward pass 3: parameter 'first\.weight' differs between ranks: rank 0 holds one value "
                r"and rank 1 another\.")
    if code == 0 or len(re.findall(expected, stderr, re.MULTILINE)) != 1:
        report(case, f"exit code {code}; expected /{expected}/ once:\n{stderr}")
    case = "sync check by default, rank 1 perturbs a parameter after step 1"
    code, _, stderr = run_job(case, [program, "sync", "--devices=2", "--perturb-rank=1", "--perturb-step=1"],
                              timeout=60, env=default)
    expected = r"^fabric: sync check failed before backward pass 3; it last passed before backward pass 1: "
    if code == 0 or len(re.findall(expected, stderr, re.MULTILINE)) != 1:
        report(case, f"exit code {code}; expected /{expected}/ once:\n{stderr}")
    case = "sync check by default, a set-up model trained outside the Fabric"
    code, _, stderr = run_job(case, [program, "sync", "--devices=2", "--how=outside"], timeout=60, env=default)
    expected = (r"^fabric: sync check failed when the Fabric ended \(after 0 backward passes\): parameter "
                r"'first\.weight' differs between ranks.* No fabric\.backward\(\) ran in this job")
    if code == 0 or len(re.findall(expected, stderr, re.MULTILINE)) != 1:
        report(case, f"exit code {code}; expected /{expected}/ once:\n{stderr}")
    for off in ("0", "off"):
        case = f"sync check off (FABRIC_CHECK_SYNC={off}), rank 1 perturbs a parameter"
        code, _, stderr = run_job(case, [program, "sync", "--devices=2", "--perturb-rank=1", "--perturb-step=3"],
                                  env=dict(os.environ, FABRIC_CHECK_SYNC=off))
        if code != 0 or "sync check" in stderr:
            report(case, f"exit code {code}:\n{stderr}")
    case = "sync check, a value it does not know"
    code, _, stderr = run_job(case, [program, "sync", "--devices=2"], env=dict(os.environ, FABRIC_CHECK_SYNC="full"))
    if code == 0 or "FABRIC_CHECK_SYNC='full' is not a valid value" not in stderr:
        report(case, f"exit code {code}; expected the valid values:\n{stderr}")


def unused_first(program):
    """Issue 38 point 3: a head that the first backward reaches on no rank,
    find_unused_parameters unchosen (ddp, zero1): the job trains in sync
    (the program checks) and rank 0 says once that the search is on; with
    "ddp_find_unused_parameters_false" it stops as before, naming them; ranks
    that disagree in their first backward stop on every rank."""
    default = {k: v for k, v in os.environ.items() if k != "FABRIC_CHECK_SYNC"}
    note = "so Fabric turned on find_unused_parameters for this model"
    for strategy in ("ddp", "zero1"):
        case = f"unused at the first backward on every rank, {strategy}"
        code, stdout, stderr = run_job(case, [program, "unused", "--devices=2", f"--strategy={strategy}",
                                              "--how=first"], env=default)
        if code != 0 or "trained in sync" not in stdout:
            report(case, f"exit code {code}:\n{stdout}\n{stderr}")
        if stderr.count(note) != 1 or "(head2.weight, head2.bias)" not in stderr:
            report(case, f"expected the note once, naming head2:\n{stderr}")
    stops = (("ddp_find_unused_parameters_false", "first",
              r"on rank {rank}, 2 trained parameters of a set-up model get no gradient in this backward"),
             ("ddp", "first_rank1", r"the ranks disagree on which trained parameters this first backward leaves "
              r"without a gradient \(rank 0: 2, rank 1: 0\)"))
    for strategy, how, expected in stops:
        case = f"unused at the first backward: {strategy}, {how}"
        start = time.monotonic()
        code, stdout, stderr = run_job(case, [program, "unused", "--devices=2", f"--strategy={strategy}",
                                              f"--how={how}"], timeout=60, env=default)
        elapsed = time.monotonic() - start
        if code == 0 or "trained in sync" in stdout or note in stderr:
            report(case, f"exit code {code}:\n{stdout}\n{stderr}")
        ranks = (0, 1) if how == "first" else (0,)
        for rank in ranks:
            if not re.search(expected.format(rank=rank), stderr):
                report(case, f"expected /{expected.format(rank=rank)}/:\n{stderr}")
        if elapsed > DEADLINE_S:
            report(case, f"took {elapsed:.1f} s (limit {DEADLINE_S} s)")
    print("unused at the first backward: followed when the ranks agree, stopped otherwise")


def replaced(program):
    """Issue 38: parameters replaced after fabric.setup(), the default sync
    check only (FABRIC_CHECK_SYNC unset). torch::load, an InputArchive read
    by Module::load and Optimizer::load, ->to(kDouble) and a teacher's weights
    copied alike: the 2-rank run equals the 1-process resume on every rank
    (the program compares), under ddp and zero2. A load on rank 0 alone, or
    values copied per rank: the job stops, non-zero, naming the cause. fsdp:
    stops with the call to use instead."""
    default = {k: v for k, v in os.environ.items() if k != "FABRIC_CHECK_SYNC"}
    note = "got new storage after fabric.setup()"
    # The checkpoints the program writes go here, and go with it (a job the
    # runtime stops never reaches the program's own clean-up).
    with tempfile.TemporaryDirectory(prefix="fabric-replaced-") as folder:
        replaced_in(program, default, note, f"--dir={folder}")


def replaced_in(program, default, note, folder):
    for strategy in ("ddp", "zero2"):
        for how in ("torch_load", "archive", "to_double", "copy_same"):
            if strategy == "zero2" and how == "copy_same":
                continue
            case = f"replaced after setup: {how}, {strategy}"
            code, stdout, stderr = run_job(case, [program, "replaced", "--devices=2", f"--strategy={strategy}",
                                                  f"--how={how}", folder], env=default)
            if code != 0 or stdout.count(f"replaced scenario ({how}) done") != 1:
                report(case, f"exit code {code}:\n{stdout}\n{stderr}")
            if stderr.count("from the 1-process resume") != 2:
                report(case, f"expected both ranks to compare with the 1-process resume:\n{stderr}")
            replaces = how != "copy_same"
            if stderr.count(note) != (1 if replaces else 0):
                report(case, f"expected the note {'once' if replaces else 'never'}:\n{stderr}")
            if "sync check" in stderr:
                report(case, f"the sync check spoke:\n{stderr}")
    stops = (("ddp", "rank0_only", r"rank 0 trains 4 parameter tensors \(212 values\) and replaced 4; rank 1 trains "
              r"4 parameter tensors \(212 values\) and replaced 0\. .*never under is_global_zero\(\) alone"),
             ("ddp", "copy_rank", r"^fabric: sync check failed before backward pass 1: parameter 'first\.weight' "
              r"differs between ranks"),
             ("zero2", "copy_same", r"set-up parameter 'first\.weight' was changed in place after Fabric last "
              r"synchronized it.*load values with fabric\.load\(path, state\)"),
             ("fsdp", "torch_load", r"set-up parameter 'first\.weight' was changed in place after Fabric last "
              r"synchronized it.*torch::load/Module::load into the set-up model.*fabric\.load\(path, state\)"))
    for strategy, how, expected in stops:
        case = f"replaced after setup: {how}, {strategy}"
        start = time.monotonic()
        code, stdout, stderr = run_job(case, [program, "replaced", "--devices=2", f"--strategy={strategy}",
                                              f"--how={how}", folder], timeout=60, env=default)
        elapsed = time.monotonic() - start
        if code == 0 or not re.search(expected, stderr, re.MULTILINE) or "done" in stdout:
            report(case, f"exit code {code}; expected /{expected}/:\n{stderr}")
        elif elapsed > DEADLINE_S:
            report(case, f"took {elapsed:.1f} s (limit {DEADLINE_S} s)")
        else:
            print(f"{case}: stopped in {elapsed:.1f} s with the cause")
    print("replaced parameters: followed under ddp and zero2, stopped with the cause otherwise")


def unused_uncaught(program):
    """A parameter left unused under ddp without find_unused_parameters, the
    error not caught by the program: the job ends promptly with the message
    naming the parameters and the fix, not with the sync check's."""
    on = dict(os.environ, FABRIC_CHECK_SYNC="1")
    named = (r"fabric\.backward\(\): on rank {rank}, 2 trained parameters of a set-up model get no "
             r"gradient in this backward \(the loss does not depend on them\): head2\.weight, "
             r"head2\.bias\.")
    for case, extra, ranks in (("every rank leaves head2 unused", [], (0, 1)),
                               ("rank 1 leaves head2 unused", ["--unused-rank=1"], (1,))):
        marker = f"--marker={uuid.uuid4().hex}"
        start = time.monotonic()
        code, _, stderr = run_job(case, [program, "unused", "--devices=2", "--uncaught=1", marker] + extra,
                                  timeout=60, env=on)
        elapsed = time.monotonic() - start
        if code == 0:
            report(case, f"the job exited 0:\n{stderr}")
        for rank in ranks:
            if not re.search(named.format(rank=rank), stderr):
                report(case, f"no message for rank {rank} naming head2.weight and head2.bias:\n{stderr}")
        if 'strategy "ddp_find_unused_parameters_true"' not in stderr:
            report(case, f"the message does not say how to enable find_unused_parameters:\n{stderr}")
        for wrong in ("sync check (FABRIC_CHECK_SYNC) failed", "different collectives", "sync check passed"):
            if wrong in stderr:
                report(case, f"stderr has {wrong!r}:\n{stderr}")
        if elapsed > DEADLINE_S:
            report(case, f"took {elapsed:.1f} s (limit {DEADLINE_S} s)")
        time.sleep(0.5)
        leftovers = processes_with_argument(marker)
        if leftovers:
            report(case, f"processes left behind: {leftovers}")
            for pid in leftovers:
                os.kill(pid, 9)
        print(f"{case}: the job ended in {elapsed:.1f} s (exit {code}) naming the parameters")


def phases_disagree(program):
    """Rank 1 alone unfreezes a parameter (training phases, issue: the set of
    parameters that require grad followed by the runtime): the ranks are in
    different collectives at that backward. The job must end promptly,
    non-zero, with a message that says the set of parameters that require
    grad changed, and leave no process."""
    for strategy in ("ddp", "zero2"):
        case = f"rank 1 alone changes the trained parameters ({strategy})"
        marker = f"--marker={uuid.uuid4().hex}"
        start = time.monotonic()
        code, stdout, stderr = run_job(case, [program, "phases", "--devices=2", f"--strategy={strategy}",
                                              "--disagree=one", marker], timeout=60)
        elapsed = time.monotonic() - start
        print(f"--- {case}: ended in {elapsed:.2f} s, exit {code}")
        print("\n".join("    " + line[:400] for line in stderr.splitlines() if "fabric" in line))
        if code == 0 or "the job went on" in stdout:
            report(case, f"the job exited {code}:\n{stdout}\n{stderr}")
        # The job monitor's message (rank 1 alone in the agreement), or the
        # agreement's own (a sampled sync check due at that backward brings
        # every rank into it).
        if (("changed which parameters require grad" not in stderr and
             "the ranks disagree on which parameters of the set-up models require grad: rank 0 trains 2 "
             "parameter tensors (48 values); rank 1 trains 3 parameter tensors (52 values)" not in stderr) or
                "freeze and unfreeze" not in stderr):
            report(case, f"no message about the changed set of parameters that require grad:\n{stderr}")
        for crash in ("terminate called", "Aborted", "core dumped", "CHECK FAILED"):
            if crash in stderr:
                report(case, f"{crash!r} in stderr:\n{stderr}")
        if elapsed > DEADLINE_S:
            report(case, f"took {elapsed:.1f} s (limit {DEADLINE_S} s)")
        time.sleep(0.5)
        leftovers = processes_with_argument(marker)
        if leftovers:
            report(case, f"processes left behind: {leftovers}")
            for pid in leftovers:
                os.kill(pid, 9)


def stdout_before_launch(program, launcher):
    """What main prints before fabric.launch() (a banner) is printed once, by
    rank 0, with 2 and 3 local ranks started by fabric.launch() and by
    fabric-run; what the ranks print after launch still shows (rank 0
    through fabric.print, rank 1 through std::cout, every other rank through
    printf); stderr before launch is untouched (once per rank), and a rank
    that fails before launch is heard on stderr."""
    for how, devices in (("launch()", 2), ("launch()", 3), ("fabric-run", 2), ("fabric-run", 3)):
        case = f"output before launch, {how}, {devices} ranks"
        command = [program, "banner", f"--devices={devices}"]
        if how == "fabric-run":
            command = [launcher, f"--devices={devices}"] + command
        code, stdout, stderr = run_job(case, command, timeout=60)
        if code != 0:
            report(case, f"exit code {code}:\n{stdout}\n{stderr}")
            continue
        expected = {"BANNER: options devices=": 1, "PRINTF-BANNER (buffered)": 1,
                    "AFTER-LAUNCH: rank 0 through fabric.print": 1,
                    "AFTER-LAUNCH: rank 1 through std::cout": 1}
        for rank in range(1, devices):
            expected[f"AFTER-LAUNCH: printf of rank {rank}"] = 1
        for text, count in expected.items():
            if stdout.count(text) != count:
                report(case, f"{text!r} printed {stdout.count(text)} times, expected {count}:\n{stdout}")
        for rank in range(devices):
            if stderr.count(f"STDERR-BEFORE-LAUNCH from rank {rank}\n") != 1:
                report(case, f"rank {rank}'s stderr before launch is not there once:\n{stderr}")
        print(f"{case}: the banner once, every rank's output after launch")

    for how in ("launch()", "fabric-run"):
        case = f"rank 1 fails before launch, {how}"
        command = [program, "banner", "--devices=2", "--fail-rank=1"]
        if how == "fabric-run":
            command = [launcher, "--devices=2"] + command
        start = time.monotonic()
        code, stdout, stderr = run_job(case, command, timeout=60)
        elapsed = time.monotonic() - start
        if code != 3:
            report(case, f"exit code {code}, expected rank 1's 3:\n{stderr}")
        if "rank 1: cannot start: bad option --fail-rank" not in stderr:
            report(case, f"rank 1's error before launch is not on stderr:\n{stderr}")
        if not re.search(r"^fabric: rank 1 \(pid \d+\) exited with code 3; stopping all ranks$",
                         stderr, re.MULTILINE):
            report(case, f"the launcher does not name rank 1:\n{stderr}")
        if stdout.count("BANNER: options devices=") > 1:
            report(case, f"the banner was printed more than once:\n{stdout}")
        if elapsed > DEADLINE_S:
            report(case, f"took {elapsed:.1f} s (limit {DEADLINE_S} s)")
        print(f"{case}: exit {code} in {elapsed:.1f} s, rank 1's stderr shown")


def load_fresh(program):
    for devices in (1, 2):
        with tempfile.TemporaryDirectory() as directory:
            case = f"load or start fresh, {devices} ranks"
            code, stdout, stderr = run_job(case, [program, "load_fresh", f"--devices={devices}",
                                                  f"--dir={directory}"])
            if code != 0 or f"load-or-start-fresh checks passed on {devices} ranks" not in stdout:
                report(case, f"exit code {code}:\n{stdout}\n{stderr}")


def main():
    commands = {"failures": (failures, 3), "torchrun": (torchrun, 3), "cluster_envs": (cluster_envs, 3),
                "fabric_run": (fabric_run, 4), "checkpoint": (checkpoint, 3),
                "loggers": (loggers, 3), "zero_checkpoint": (zero_checkpoint, 3),
                "fsdp_checkpoint": (lambda program: zero_checkpoint(program, "fsdp"), 3),
                "timeout": (collective_timeout, 3), "divergence": (divergence, 3),
                "divergence_external": (divergence_external, 4), "late_work": (late_work, 3),
                "paths": (paths, 3), "paths_external": (paths_external, 4),
                "warnings": (warnings, 3), "sync_check": (sync_check, 3), "replaced": (replaced, 3),
                "unused_first": (unused_first, 3),
                "unused_uncaught": (unused_uncaught, 3),
                "phases_disagree": (phases_disagree, 3),
                "stdout_before_launch": (stdout_before_launch, 4),
                "load_fresh": (load_fresh, 3)}
    if len(sys.argv) < 2 or sys.argv[1] not in commands or len(sys.argv) != commands[sys.argv[1]][1]:
        print(__doc__)
        return 2
    commands[sys.argv[1]][0](*sys.argv[2:])
    if problems:
        print(f"{len(problems)} problem(s)")
        return 1
    print("all cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
