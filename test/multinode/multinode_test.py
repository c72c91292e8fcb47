#!/usr/bin/env python3
"""Multi-node tests: two test hosts (network namespaces joined by a virtual
link, hosts.py) run a 2 nodes x 2 ranks job of multinode_program.

  multinode_test.py CASE --program PROGRAM --fabric-run FABRIC_RUN

  two_nodes     fabric-run on each host: world size 4, parameters identical
                on all 4 ranks after every step (FABRIC_CHECK_SYNC), the same
                losses as a 4-rank job on one host, the checkpoint written
                once, by global rank 0 (each host has its own folder, as
                machines have their own disks), and resumed by a 1 node x 4
                ranks job with the uninterrupted run's losses.
  slurm         the same job from SLURM-style variables on each host.
  interfaces    host 1 has a second interface (holding the default route)
                that cannot reach host 0: the job still trains in sync; the
                store listens on the main address only (FABRIC_STORE_BIND=all:
                every interface); GLOO_SOCKET_IFNAME names the interface.
  node_killed   every process of host 1 killed mid-training: host 0's ranks
                exit within 15 s naming node 1 and its ranks; nothing left.
  late_node     host 1 starts 5 s after host 0: it joins, the job trains.
  missing_node  host 1 never starts: host 0 ends at the rendezvous timeout
                naming node 1's ranks as missing.
  link_cut      the link goes down mid-training (no connection reset): every
                rank on both hosts exits with a message within the collective
                timeout (plus slack); no process left on either host.
  mismatch      host 1 started with another world size, then with another
                number of nodes: refused, both values named.
  fixture       the test hosts and their processes are gone after a test
                that fails inside them and after a SIGTERM to the test.

Exit 77 (ctest's skip code) with a loud message when test hosts cannot be
made here (not root, no iproute2).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hosts as testhosts  # noqa: E402

PORT = "29431"
STEP = re.compile(r"^step (\d+) loss (\S+)$", re.M)


def fail(message):
    print(f"MULTINODE FAILED: {message}", flush=True)
    sys.exit(1)


def losses(text):
    return {int(s): float(v) for s, v in STEP.findall(text)}


def environment(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LT_", "SLURM_", "OMPI_", "MASTER_", "GLOO_", "FABRIC_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK")}
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra)
    return env


class Job:
    """Processes started on the test hosts, their output collected as it comes."""

    def __init__(self):
        self.processes = []  # (label, Popen, [stdout chunks], [stderr chunks])
        self.readers = {}  # label -> the threads reading its pipes

    def add(self, label, process):
        out, err = [], []
        self.readers[label] = []
        for stream, sink in ((process.stdout, out), (process.stderr, err)):
            reader = threading.Thread(target=lambda s=stream, k=sink: [k.append(line) for line in s], daemon=True)
            reader.start()
            self.readers[label].append(reader)
        self.processes.append((label, process, out, err))
        return process

    def drain(self, label, limit=10):
        """After `label` ended: its pipes read to their end (a loaded machine
        may not have run the reader threads yet), or `limit` s."""
        deadline = time.time() + limit
        for reader in self.readers.get(label, []):
            reader.join(timeout=max(0.0, deadline - time.time()))

    def output(self, label):
        for l, _, out, err in self.processes:
            if l == label:
                return "".join(out), "".join(err)
        return "", ""

    def wait_for_line(self, label, pattern, limit):
        deadline = time.time() + limit
        while time.time() < deadline:
            if re.search(pattern, self.output(label)[0], re.M):
                return
            time.sleep(0.05)
        fail(f"{label}: no line matching {pattern!r} within {limit} s:\n{self.describe()}")

    def wait(self, limit):
        """Waits for every process; returns {label: (code, seconds)}."""
        start, codes = time.time(), {}
        for label, process, _, _ in self.processes:
            try:
                process.wait(timeout=max(0.1, limit - (time.time() - start)))
            except subprocess.TimeoutExpired:
                fail(f"{label} still runs after {limit} s:\n{self.describe()}")
            codes[label] = (process.returncode, time.time() - start)
        for label, _, _, _ in self.processes:
            self.drain(label)
        return codes

    def describe(self):
        text = ""
        for label, process, out, err in self.processes:
            text += (f"--- {label} (exit {process.poll()})\n[stdout]\n{''.join(out)[-3000:]}"
                     f"[stderr]\n{''.join(err)[-3000:]}\n")
        return text


def fabric_run_node(args, hosts, node, extra, devices=2, num_nodes=2, node_rank=None, env=None):
    argv = [args.fabric_run, "--accelerator", "cpu", "--devices", str(devices), "--num-nodes", str(num_nodes),
            "--node-rank", str(node if node_rank is None else node_rank), "--main-address", hosts.addresses[0],
            "--main-port", PORT, args.program, *extra]
    return hosts.start(node, argv, env=env or environment())


def reference(args, steps):
    """The same job as 4 ranks on one host (this machine's loopback)."""
    result = subprocess.run([args.fabric_run, "--accelerator", "cpu", "--devices", "4", args.program,
                             "--steps", str(steps)], capture_output=True, text=True, timeout=300,
                            env=environment())
    if result.returncode != 0:
        fail(f"the 4-rank reference run on one host failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return losses(result.stdout)


def same_losses(label, got, wanted, steps):
    if sorted(got) != sorted(steps):
        fail(f"{label}: printed the losses of steps {sorted(got)}, expected {sorted(steps)}")
    for step in steps:
        a, b = got[step], wanted[step]
        if abs(a - b) > 1e-6 * max(1.0, abs(b)):
            fail(f"{label}: step {step} loss {a!r}, the 4-rank single-host run {b!r}")


def expect_in_sync(label, stderr, steps, ranks=4):
    m = re.search(r"fabric: sync check passed: (\d+) steps, \d+ parameter tensors identical on (\d+) ranks", stderr)
    if not m or int(m.group(1)) < steps or int(m.group(2)) != ranks:
        fail(f"{label}: no 'sync check passed' over {steps} steps on {ranks} ranks:\n{stderr[-3000:]}")


def expect_nothing_left(hosts, label):
    for host in range(len(hosts.names)):
        deadline = time.time() + 5
        while hosts.pids(host) and time.time() < deadline:
            time.sleep(0.1)
        if hosts.pids(host):
            listing = ""
            for pid in hosts.pids(host):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        command = f.read().replace(b"\0", b" ").decode(errors="replace")
                    listing += f"{pid} {command}\n"
                except OSError:
                    pass
            fail(f"{label}: processes left on host {host}:\n{listing}")


def said(err):
    """The runtime's and fabric-run's own lines of a stderr, for the log."""
    lines = [l.strip() for l in err.splitlines() if l.startswith("fabric") or "what():" in l]
    return "\n    ".join(lines[:6])


# ---- cases -----------------------------------------------------------------

def case_two_nodes(args, work):
    steps = 20
    wanted = reference(args, steps)
    dirs = [os.path.join(work, f"host{i}") for i in range(2)]
    for d in dirs:
        os.makedirs(d)
    with testhosts.TestHosts("fzn") as hosts:
        job = Job()
        for node in range(2):
            job.add(f"host {node}", fabric_run_node(args, hosts, node,
                                                    ["--steps", str(steps), "--save-at", "10", "--dir", dirs[node]],
                                                    env=environment(FABRIC_CHECK_SYNC="1")))
        codes = job.wait(180)
        if any(code != 0 for code, _ in codes.values()):
            fail(f"the 2-node job failed: {codes}\n{job.describe()}")
        out0, err0 = job.output("host 0")
        out1, _ = job.output("host 1")
        if "world 4 nodes 0 0 1 1" not in out0:
            fail(f"rank 0 does not see 4 ranks on nodes 0 0 1 1:\n{out0}")
        if out1.strip():
            fail(f"host 1 printed (only global rank 0 prints):\n{out1}")
        same_losses("2 nodes x 2 ranks", losses(out0), wanted, range(1, steps + 1))
        expect_in_sync("2 nodes x 2 ranks", err0, steps)
        expect_nothing_left(hosts, "after the 2-node job")
    if os.listdir(dirs[0]) != ["ckpt.pt"] or os.listdir(dirs[1]):
        fail(f"checkpoint files: host 0 {os.listdir(dirs[0])}, host 1 {os.listdir(dirs[1])}; "
             f"expected ckpt.pt on host 0 only (global rank 0 writes it, once)")
    # Resumed by one node with 4 ranks: the uninterrupted run's losses.
    resumed = subprocess.run([args.fabric_run, "--accelerator", "cpu", "--devices", "4", args.program,
                              "--steps", str(steps), "--resume", os.path.join(dirs[0], "ckpt.pt")],
                             capture_output=True, text=True, timeout=300, env=environment())
    if resumed.returncode != 0:
        fail(f"resuming on 1 node x 4 ranks failed:\n{resumed.stderr[-3000:]}")
    same_losses("resumed on 1 node x 4 ranks", losses(resumed.stdout), wanted, range(11, steps + 1))
    print(f"MULTINODE OK two_nodes: 2 nodes x 2 ranks in sync for {steps} steps, losses equal to "
          f"4 ranks on one host, checkpoint written once and resumed on 1 node x 4 ranks")


def case_slurm(args, work):
    steps = 12
    wanted = reference(args, steps)
    with testhosts.TestHosts("fzs") as hosts:
        job = Job()
        for node in range(2):
            for local in range(2):
                rank = node * 2 + local
                env = environment(SLURM_PROCID=str(rank), SLURM_NTASKS="4", SLURM_LOCALID=str(local),
                                  SLURM_NODEID=str(node), SLURM_NNODES="2", SLURM_NTASKS_PER_NODE="2",
                                  SLURM_NODELIST="fzhost[0-1]", SLURM_JOB_ID="4242", SLURM_JOB_NAME="train",
                                  MASTER_ADDR=hosts.addresses[0], MASTER_PORT=PORT, FABRIC_CHECK_SYNC="1")
                job.add(f"rank {rank}", hosts.start(node, [args.program, "--steps", str(steps)], env=env))
        codes = job.wait(180)
        if any(code != 0 for code, _ in codes.values()):
            fail(f"the SLURM-style job failed: {codes}\n{job.describe()}")
        out0, err0 = job.output("rank 0")
        if "world 4 nodes 0 0 1 1" not in out0:
            fail(f"rank 0 does not see 4 ranks on nodes 0 0 1 1:\n{out0}")
        same_losses("SLURM-style 2 nodes x 2 ranks", losses(out0), wanted, range(1, steps + 1))
        expect_in_sync("SLURM-style 2 nodes x 2 ranks", err0, steps)
        expect_nothing_left(hosts, "after the SLURM-style job")
    print("MULTINODE OK slurm: SLURM-style variables on 2 hosts, 4 ranks in sync, losses equal")


def case_interfaces(args, work):
    steps = 12
    wanted = reference(args, steps)
    with testhosts.TestHosts("fzi", stray=True) as hosts:
        # The store listens on the main address only, unless told otherwise.
        main = hosts.addresses[0]
        for bind, want in ((None, {main, f"[::ffff:{main}]"}), ("all", {"0.0.0.0", "*", "[::]"})):
            job = Job()
            extra = {"FABRIC_CHECK_SYNC": "1"}
            if bind:
                extra["FABRIC_STORE_BIND"] = bind
            for node in range(2):
                job.add(f"host {node}", fabric_run_node(args, hosts, node, ["--steps", str(steps), "--step-ms", "300"],
                                                        env=environment(**extra)))
            job.wait_for_line("host 0", r"^step 2 ", 120)
            bound = {address for address, port in hosts.listening(0) if port == PORT}
            if not bound or not bound <= want:
                fail(f"FABRIC_STORE_BIND={bind}: the store listens on {sorted(bound)}, expected {sorted(want)}")
            codes = job.wait(180)
            if any(code != 0 for code, _ in codes.values()):
                fail(f"the job with a stray interface on host 1 failed: {codes}\n{job.describe()}")
            out0, err0 = job.output("host 0")
            same_losses(f"stray interface (FABRIC_STORE_BIND={bind})", losses(out0), wanted, range(1, steps + 1))
            expect_in_sync("stray interface", err0, steps)
        # An interface named by GLOO_SOCKET_IFNAME.
        job = Job()
        for node in range(2):
            job.add(f"host {node}", fabric_run_node(args, hosts, node, ["--steps", str(steps)],
                                                    env=environment(GLOO_SOCKET_IFNAME=hosts.links[node],
                                                                    FABRIC_CHECK_SYNC="1")))
        codes = job.wait(180)
        if any(code != 0 for code, _ in codes.values()):
            fail(f"the job with GLOO_SOCKET_IFNAME failed: {codes}\n{job.describe()}")
        expect_in_sync("GLOO_SOCKET_IFNAME", job.output("host 0")[1], steps)
        expect_nothing_left(hosts, "after the interface checks")
    print("MULTINODE OK interfaces: a stray interface with the default route, the store on the main "
          "address only (all with FABRIC_STORE_BIND=all), GLOO_SOCKET_IFNAME honoured")


def case_node_killed(args, work):
    with testhosts.TestHosts("fzk") as hosts:
        job = Job()
        for node in range(2):
            job.add(f"host {node}", fabric_run_node(args, hosts, node, ["--steps", "100000", "--step-ms", "20"]))
        job.wait_for_line("host 0", r"^step 10 ", 120)
        killed = time.time()
        hosts.kill_host(1)
        _, process, _, _ = job.processes[0]
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            fail(f"host 0 still runs 30 s after node 1 was killed:\n{job.describe()}")
        took = time.time() - killed
        job.drain("host 0")
        _, err0 = job.output("host 0")
        if process.returncode == 0:
            fail(f"host 0 exited 0 after losing node 1:\n{err0[-3000:]}")
        if took > 15:
            fail(f"host 0 took {took:.1f} s to end after node 1 was killed (limit 15 s)")
        if not re.search(r"lost node 1 \(ranks 2, 3 at " + re.escape(hosts.addresses[1]) + r"\)", err0):
            fail(f"host 0's message does not name node 1 and its ranks:\n{err0[-3000:]}")
        expect_nothing_left(hosts, "after node 1 was killed")
    print(f"MULTINODE OK node_killed: host 0 ended {took:.1f} s after node 1 was killed, naming it:\n    {said(err0)}")


def case_late_node(args, work):
    steps = 8
    wanted = reference(args, steps)
    with testhosts.TestHosts("fzl") as hosts:
        job = Job()
        job.add("host 0", fabric_run_node(args, hosts, 0, ["--steps", str(steps), "--timeout-ms", "60000"]))
        time.sleep(5)
        job.add("host 1", fabric_run_node(args, hosts, 1, ["--steps", str(steps), "--timeout-ms", "60000"]))
        codes = job.wait(180)
        if any(code != 0 for code, _ in codes.values()):
            fail(f"the job with a late node failed: {codes}\n{job.describe()}")
        same_losses("a node 5 s late", losses(job.output("host 0")[0]), wanted, range(1, steps + 1))
        expect_nothing_left(hosts, "after the late node")
    print("MULTINODE OK late_node: node 1 started 5 s late, joined, same losses")


def case_missing_node(args, work):
    with testhosts.TestHosts("fzm") as hosts:
        job = Job()
        job.add("host 0", fabric_run_node(args, hosts, 0, ["--timeout-ms", "5000"]))
        codes = job.wait(60)
        code, took = codes["host 0"]
        _, err0 = job.output("host 0")
        if code == 0:
            fail("host 0 trained without node 1")
        if took > 5 + 15:
            fail(f"host 0 took {took:.1f} s to give up (timeout 5 s)")
        if "missing: node 1: ranks 2, 3" not in err0:
            fail(f"host 0's message does not name node 1's ranks as missing:\n{err0[-3000:]}")
        expect_nothing_left(hosts, "after the missing node")
    print(f"MULTINODE OK missing_node: host 0 gave up after {took:.1f} s naming node 1's ranks:\n    {said(err0)}")


def case_link_cut(args, work):
    timeout_s = 5
    with testhosts.TestHosts("fzc") as hosts:
        job = Job()
        for node in range(2):
            job.add(f"host {node}", fabric_run_node(args, hosts, node, ["--steps", "100000", "--step-ms", "20",
                                                                        "--timeout-ms", str(timeout_s * 1000)]))
        job.wait_for_line("host 0", r"^step 10 ", 120)
        cut = time.time()
        hosts.cut_link()
        limit = timeout_s + 20
        for label, process, _, _ in job.processes:
            try:
                process.wait(timeout=max(0.1, limit - (time.time() - cut)))
            except subprocess.TimeoutExpired:
                fail(f"{label} still runs {limit} s after the link was cut:\n{job.describe()}")
        took = time.time() - cut
        for label, process, _, _ in job.processes:
            job.drain(label)
            err = job.output(label)[1]
            if process.returncode == 0:
                fail(f"{label} exited 0 after the link was cut")
            if "fabric" not in err or not re.search(r"timed out|lost node|cannot reach|no valid answer", err):
                fail(f"{label} ended without a message that says what happened:\n{err[-3000:]}")
            print(f"{label}:\n    {said(err)}")
        expect_nothing_left(hosts, "after the link was cut")
    print(f"MULTINODE OK link_cut: every rank ended {took:.1f} s after the link was cut "
          f"(collective timeout {timeout_s} s), with a message")


def case_mismatch(args, work):
    with testhosts.TestHosts("fzw") as hosts:
        for label, host1, wanted in (
                ("another world size", dict(devices=3), r"world size 6.*world size 4|world size 4.*world size 6"),
                ("another number of nodes", dict(devices=1, num_nodes=4, node_rank=2), r"4 nodes.*2 nodes|2 nodes.*4 nodes")):
            job = Job()
            job.add("host 0", fabric_run_node(args, hosts, 0, ["--timeout-ms", "20000"]))
            job.add("host 1", fabric_run_node(args, hosts, 1, ["--timeout-ms", "20000"], **host1))
            codes = job.wait(60)
            if any(code == 0 for code, _ in codes.values()):
                fail(f"{label}: a node trained: {codes}\n{job.describe()}")
            both = job.output("host 0")[1] + job.output("host 1")[1]
            if not re.search(wanted, both):
                fail(f"{label}: no message naming both values ({wanted}):\n{job.describe()}")
            print(f"{label}:\n    {said(both)}")
            slowest = max(t for _, t in codes.values())
            if slowest > 15:
                fail(f"{label}: refused only after {slowest:.1f} s")
            expect_nothing_left(hosts, f"after {label}")
    print("MULTINODE OK mismatch: another world size and another number of nodes refused, both values named")


def leftovers(names, links, marker):
    """Namespaces, interfaces and processes (by a marker in argv) still there."""
    spaces = [n for n in names if n in testhosts.ip("netns", "list", check=False).split()]
    interfaces = [l for l in links if l in testhosts.ip("link", "show", check=False)]
    processes = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        processes.append(int(pid))
            except OSError:
                pass
    return spaces, interfaces, processes


def case_fixture(args, work):
    """The test hosts go away whatever happens: a test that fails inside
    them, and a test process stopped by SIGTERM (ctest's timeout)."""
    marker = f"fzmarker{os.getpid()}"
    sleeper = ["sh", "-c", f"exec sleep 1000 # {marker}", marker]
    try:
        with testhosts.TestHosts("fzf") as hosts:
            names, links = list(hosts.names), list(hosts.links)
            for host in range(2):
                hosts.start(host, sleeper)
            time.sleep(0.5)
            raise RuntimeError("a failing test")
    except RuntimeError:
        pass
    left = leftovers(names, links, marker)
    if any(left):
        fail(f"after a failing test: namespaces, interfaces, processes left: {left}")
    # A test process that is terminated while its hosts run programs.
    child = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
import hosts
with hosts.TestHosts("fzg") as h:
    print(" ".join(h.names + h.links), flush=True)
    for host in range(2):
        h.start(host, {sleeper!r})
    print("started", flush=True)
    time.sleep(1000)
"""], stdout=subprocess.PIPE, text=True)
    names = child.stdout.readline().split()
    if child.stdout.readline().strip() != "started":
        fail("the child test did not start its programs")
    time.sleep(0.5)
    child.terminate()
    child.wait(timeout=30)
    left = leftovers(names[:2], names[2:], marker)
    if any(left):
        fail(f"after SIGTERM: namespaces, interfaces, processes left: {left}")
    print(f"MULTINODE OK fixture: nothing left after a failing test or a SIGTERM "
          f"(child exit {child.returncode})")


CASES = {name[len("case_"):]: f for name, f in globals().items() if name.startswith("case_")}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("--program", required=True)
    parser.add_argument("--fabric-run", required=True)
    args = parser.parse_args()
    why = testhosts.available()
    if why:
        print(f"MULTINODE SKIPPED (NOT RUN): {why}. The multi-node tests need two test hosts "
              f"(network namespaces); run them as root.", flush=True)
        sys.exit(77)
    work = tempfile.mkdtemp(prefix="fabric-multinode-")
    try:
        CASES[args.case](args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
