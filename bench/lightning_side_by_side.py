"""The C++ runtime side by side with Python's Lightning Fabric, on CPU.

  bench/side_by_side.sh [--rounds 3] [--models mlp,lm,wide] [--steps 30]
  (which builds the C++ side against the PyPI torch and runs this file with
  that torch's Python: both sides use the same torch version)

Three models -- a small MLP (0.6 M parameters, batch 64), the corpus
transformer LM (../shared/corpus/transformer_lm: vocab 64, dim 64, 4 heads,
2 layers, batch 32 x 16 tokens) and a wide MLP (21 M parameters, batch 32) --
with the same initial weights, data and SGD, 2 ranks on Gloo, one intra-op
thread each, trained by four implementations in fresh processes:

  lightning     lightning_fabric.Fabric(strategy="ddp"): fabric.setup,
                fabric.backward, optimizer.step() (this file's --worker)
  fabric-ddp    the C++ runtime as fabricize emits it (side_by_side.cpp)
  fabric-zero2  the same with strategy "zero2"
  reducer       a hand-written c10d::Reducer loop in C++ (hand_reducer.h)
and, as each language's compute floor, python-local and cxx-local: the same
2 processes training alone (plain backward and step, no synchronization).
The synchronization a DDP implementation adds is its step time minus its
language's floor: what the C++ frontend's own kernels cost (its
MultiheadAttention is not Python's) is then not mistaken for Fabric's.

Rounds interleave the implementations (a rotated order each round) so that
the machine's load hits all of them alike. Reported per model and
implementation: the median step time over the rounds' medians (each step
counts as its slowest rank's time), the peak resident memory of the largest
rank, and the ratios against Lightning and against the hand-written Reducer,
with the issue's targets. The first and last losses of every run must agree
with Lightning's, the floors' with python-local's (same weights, same data,
same optimizer: the same computation); a disagreement fails the run.

  bench/side_by_side.sh --profile [--models mlp,lm] [--impls lightning,fabric-ddp,...] [--steps 200]

traces each implementation once under `perf sched record` (every context
switch, on CLOCK_MONOTONIC) and reports, for the timed steps only, where
each rank's time goes: its training thread running, waiting for a core, or
asleep (waiting for the other rank or for Gloo); the CPU time of Gloo's
threads; the machine's idle time. It tells CPU cost from latency, which the
phase timings cannot.
"""
import argparse
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import time

# The sizes: side_by_side.cpp's spec_of() holds the same table.
MODELS = {
    "mlp": dict(kind="mlp", input=128, hidden=512, layers=3, out=10, batch=64, lr=0.01),
    "lm": dict(kind="lm", vocab=64, dim=64, heads=4, layers=2, seq=16, batch=32, lr=0.1),
    "wide": dict(kind="mlp", input=1024, hidden=4096, layers=2, out=10, batch=32, lr=0.01),
}
RUN_TIMEOUT_S = 300  # one implementation on one model: seconds, normally
IMPLEMENTATIONS = ["lightning", "fabric-ddp", "fabric-zero2", "reducer", "python-local", "cxx-local"]
# Only with --profile --impls: a plain backward, then one all-reduce of all
# gradients in one flat buffer (no Reducer, no overlap).
EXTRA_IMPLEMENTATIONS = ["flat-allreduce"]
FLOOR = {"lightning": "python-local", "python-local": "python-local"}  # the rest: cxx-local
# Issue 42's targets: C++ Fabric's step against Lightning's and against the
# hand-written Reducer loop, its peak memory against Lightning's, and
# zero2's step against ddp's.
TARGET_VS_LIGHTNING = {"mlp": 0.8, "lm": 0.8, "wide": 0.8}
TARGET_VS_REDUCER = 1.0
TARGET_MEMORY_VS_LIGHTNING = 0.6
TARGET_ZERO2_VS_DDP = 1.15


def build_model(spec):
    import torch
    from torch import nn

    if spec["kind"] == "lm":
        class TransformerLM(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(spec["vocab"], spec["dim"])
                layer = nn.TransformerEncoderLayer(spec["dim"], spec["heads"],
                                                   dim_feedforward=4 * spec["dim"], dropout=0.0)
                self.encoder = nn.TransformerEncoder(layer, spec["layers"], enable_nested_tensor=False)
                self.head = nn.Linear(spec["dim"], spec["vocab"])

            def forward(self, tokens):
                x = self.embed(tokens).transpose(0, 1)
                x = self.encoder(x).transpose(0, 1)
                return torch.log_softmax(self.head(x), -1).flatten(0, 1)

        return TransformerLM()

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.count = spec["layers"]
            for i in range(self.count):  # the C++ module's names: linear0, linear1, ...
                setattr(self, f"linear{i}", nn.Linear(spec["input"] if i == 0 else spec["hidden"],
                                                      spec["hidden"]))
            self.head = nn.Linear(spec["hidden"], spec["out"])

        def forward(self, x):
            for i in range(self.count):
                x = torch.relu(getattr(self, f"linear{i}")(x))
            return torch.log_softmax(self.head(x), 1)

    return Mlp()


def fill_parameters(model):
    """side_by_side.cpp's fill_parameters: parameter i from manual_seed(1000 + i)."""
    import torch

    with torch.no_grad():
        for index, (name, parameter) in enumerate(model.named_parameters()):
            torch.manual_seed(1000 + index)
            if "norm" in name and name.endswith("weight"):
                parameter.uniform_(0.9, 1.1)
            else:
                bound = 1.0 / parameter.shape[-1] ** 0.5 if parameter.dim() > 1 else 0.05
                parameter.uniform_(-bound, bound)


def resident_mib():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGESIZE") / 2**20


def worker(args):
    """One Lightning Fabric run (both ranks: Fabric's launcher starts rank 1)."""
    import torch
    from lightning_fabric import Fabric

    spec = MODELS[args.model]
    fabric = Fabric(accelerator="cpu", devices=args.devices, strategy="ddp", precision="32-true")
    fabric.launch()
    torch.set_num_threads(1)
    base_mib = resident_mib()
    model = build_model(spec)
    fill_parameters(model)
    parameters = sum(p.numel() for p in model.parameters())
    torch.manual_seed(fabric.global_rank + 1)
    batches = []
    for _ in range(8):
        if spec["kind"] == "lm":
            tokens = torch.randint(0, spec["vocab"], (spec["batch"], spec["seq"] + 1))
            batches.append((tokens[:, :spec["seq"]], tokens[:, 1:].reshape(-1)))
        else:
            batches.append((torch.randn(spec["batch"], spec["input"]),
                            torch.randint(0, spec["out"], (spec["batch"],))))
    optimizer = torch.optim.SGD(model.parameters(), lr=spec["lr"])
    local = args.impl == "python-local"
    if not local:
        model, optimizer = fabric.setup(model, optimizer)

    phase = [0.0, 0.0, 0.0]  # side_by_side.cpp's phases: forward, backward, optimizer

    def step(index):
        data, target = batches[index % len(batches)]
        mark = time.perf_counter()
        optimizer.zero_grad()
        loss = torch.nn.functional.nll_loss(model(data), target)
        now = time.perf_counter()
        phase[0], mark = now - mark, now
        if local:
            loss.backward()
        else:
            fabric.backward(loss)
        now = time.perf_counter()
        phase[1], mark = now - mark, now
        optimizer.step()
        phase[2] = time.perf_counter() - mark
        return loss

    first_loss = step(0).item()
    for i in range(1, args.warmup):
        step(i)
    fabric.barrier()
    window_start = time.monotonic()
    seconds = [[], [], [], []]  # the whole step, then the phases
    for i in range(args.warmup, args.warmup + args.steps):
        loss = step(i)
        seconds[0].append(sum(phase))
        for p in range(3):
            seconds[p + 1].append(phase[p])
    window_end = time.monotonic()
    last_loss = loss.item()
    slowest_ms = [[1e3 * s for s in fabric.all_gather(torch.tensor(k, dtype=torch.float64)).max(0).values.tolist()]
                  for k in seconds]
    step_ms = slowest_ms[0]
    peak = fabric.all_gather(torch.tensor(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                                          dtype=torch.float64)).max().item()
    base = fabric.all_gather(torch.tensor(base_mib, dtype=torch.float64)).max().item()
    if fabric.global_rank == 0:
        quantiles = statistics.quantiles(step_ms, n=10, method="inclusive")
        print("RESULT " + json.dumps({
            "impl": args.impl, "model": args.model, "torch": torch.__version__.split("+")[0],
            "ranks": fabric.world_size, "threads": torch.get_num_threads(), "parameters": parameters,
            "steps": args.steps, "median_ms": statistics.median(step_ms), "p90_ms": quantiles[8],
            "forward_ms": statistics.median(slowest_ms[1]), "backward_ms": statistics.median(slowest_ms[2]),
            "optimizer_ms": statistics.median(slowest_ms[3]),
            "peak_rss_mib": peak, "base_rss_mib": base, "first_loss": first_loss,
            "last_loss": last_loss, "window_start": window_start, "window_end": window_end}), flush=True)
    # Every rank has its figures: leave without the interpreter's teardown,
    # which, with Gloo's threads still running, sometimes aborts ("terminate
    # called without an active exception") or hangs in destroying the group.
    fabric.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_one(args, model, impl, trace=None):
    if impl in ("lightning", "python-local"):
        command = [sys.executable, os.path.abspath(__file__), "--worker", "--impl", impl, "--model", model,
                   "--steps", str(args.steps), "--warmup", str(args.warmup), "--devices", "2"]
    else:
        command = [args.cxx, f"--model={model}", f"--impl={impl}", f"--steps={args.steps}",
                   f"--warmup={args.warmup}", "--devices=2"]
    if trace:
        # Every context switch, on the clock the workers' windows are read from.
        command = ["perf", "sched", "record", "-q", "-k", "CLOCK_MONOTONIC", "-o", trace, "--"] + command
    env = dict(os.environ, OMP_NUM_THREADS="1")
    started = time.time()
    # Its own process group: a run that hangs is killed with every rank it started.
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        sys.exit(f"side by side: {' '.join(command)} did not end within {RUN_TIMEOUT_S} s (killed):\n"
                 f"{stdout[-3000:]}{stderr[-3000:]}")
    lines = [l for l in stdout.splitlines() if l.startswith("RESULT ")]
    if process.returncode != 0 or len(lines) != 1:
        sys.exit(f"side by side: {' '.join(command)} exited {process.returncode} without a RESULT line:\n"
                 f"{stdout[-3000:]}{stderr[-3000:]}")
    measured = json.loads(lines[0][len("RESULT "):])
    if not trace:
        print(f"  {model:5} {impl:13} median {measured['median_ms']:9.3f} ms  p90 {measured['p90_ms']:9.3f} ms  "
              f"(fwd {measured['forward_ms']:.2f} bwd {measured['backward_ms']:.2f} opt {measured['optimizer_ms']:.2f})  "
              f"peak {measured['peak_rss_mib']:7.1f} MiB  last loss {measured['last_loss']:.6f}  "
              f"({time.time() - started:.1f} s)", flush=True)
    return measured


# One line of `perf sched timehist --state`: a thread switched out at `time`
# in `state`, after being off its core for `wait` ms since its previous
# switch-out, runnable but not running for `delay` ms after its wakeup, and
# running for `run` ms.
TIMEHIST_LINE = re.compile(r"^\s*(\d+\.\d+)\s+\[\d+\]\s+(.+?)\[(\d+)(?:/(\d+))?\]"
                           r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$")


def scheduler_profile(trace, measured):
    """Where each rank's time goes during the timed steps, from the trace of
    every context switch: per step and rank, the training thread's time
    running, runnable but waiting for a core, and asleep (waiting for the
    other rank or for Gloo); the CPU time of Gloo's I/O loop and of the rank's
    other threads (Gloo's workers, which run the reductions); per step, the
    CPU time of everything else and the idle time of the machine's cores."""
    timehist = subprocess.run(["perf", "sched", "timehist", "--state", "-i", trace], capture_output=True, text=True)
    if timehist.returncode != 0:
        sys.exit(f"side by side: perf sched timehist failed:\n{timehist.stderr[-2000:]}")
    start, end = measured["window_start"] * 1e3, measured["window_end"] * 1e3  # ms

    def inside(first, last):  # the part of [first, last] in the timed window
        return max(0.0, min(last, end) - max(first, start))

    threads = {}
    for line in timehist.stdout.splitlines():
        match = TIMEHIST_LINE.match(line)
        if not match:
            continue
        out = float(match[1]) * 1e3
        wait, delay, run = float(match[5]), float(match[6]), float(match[7])
        tid = int(match[3])
        thread = threads.setdefault(tid, dict(name=match[2], pid=int(match[4] or tid), run=0.0, delay=0.0,
                                              sleep=0.0, switches=0, state="S"))
        ran_from = out - run
        thread["run"] += inside(ran_from, out)
        # Off the core since the previous switch-out: preempted (it was still
        # runnable: waiting for a core, like the delay after a wakeup) or asleep.
        off = inside(ran_from - delay - wait, ran_from - delay)
        thread["delay" if thread["state"].startswith("R") else "sleep"] += off
        thread["delay"] += inside(ran_from - delay, ran_from)
        thread["state"] = match[8]
        thread["switches"] += start <= out <= end
    # The ranks: the processes with Gloo's I/O threads.
    ranks = {t["pid"] for t in threads.values() if t["name"].startswith("pt_gloo")}
    if len(ranks) != 2:
        sys.exit(f"side by side: expected the trace to show 2 ranks with Gloo threads, found {len(ranks)}")
    steps, per_rank_step = measured["steps"], measured["steps"] * len(ranks)
    profile = dict(training_run=0.0, training_delay=0.0, training_sleep=0.0, gloo_loop=0.0, rank_other=0.0,
                   outside=0.0, switches=0.0)
    for tid, thread in threads.items():
        if thread["pid"] not in ranks:
            profile["outside"] += thread["run"] / steps
        elif tid == thread["pid"]:
            profile["training_run"] += thread["run"] / per_rank_step
            profile["training_delay"] += thread["delay"] / per_rank_step
            profile["training_sleep"] += thread["sleep"] / per_rank_step
        elif thread["name"].startswith("pt_gloo"):
            profile["gloo_loop"] += thread["run"] / per_rank_step
        else:
            profile["rank_other"] += thread["run"] / per_rank_step
        if thread["pid"] in ranks:
            profile["switches"] += thread["switches"] / per_rank_step
    busy = sum(t["run"] for t in threads.values() if "idle" not in t["name"])
    profile["idle"] = max(0.0, os.cpu_count() * (end - start) - busy) / steps
    profile["window_step"] = (end - start) / steps
    return profile


def profile_main(args, models):
    """--profile: each implementation once per model under `perf sched record`."""
    import shutil
    import tempfile
    if not shutil.which("perf"):
        sys.exit("side by side: --profile needs perf (Debian package linux-perf)")
    impls = args.impls.split(",")
    unknown = [i for i in impls if i not in IMPLEMENTATIONS + EXTRA_IMPLEMENTATIONS]
    if unknown:
        sys.exit(f"side by side: unknown implementations {unknown}; "
                 f"choose from {IMPLEMENTATIONS + EXTRA_IMPLEMENTATIONS}")
    print(f"ms per step of the timed window; 'per rank' columns are averaged over the 2 ranks; "
          f"idle: of the machine's {os.cpu_count()} cores")
    print(f"{'':22}{'':>6} {'training thread, per rank':^26} {'other threads, per rank':^24} "
          f"{'':>8} {'per step':^17}")
    print(f"{'model':6} {'implementation':15} {'step':>6} {'running':>8} {'wait core':>9} {'asleep':>7} "
          f"{'gloo loop':>10} {'others':>6} {'switches':>8} {'processes':>10} {'idle':>6}")
    with tempfile.TemporaryDirectory() as directory:
        for model in models:
            for impl in impls:
                trace = os.path.join(directory, f"{model}-{impl}.data")
                measured = run_one(args, model, impl, trace)
                p = scheduler_profile(trace, measured)
                print(f"{model:6} {impl:15} {p['window_step']:6.2f} {p['training_run']:8.2f} "
                      f"{p['training_delay']:9.2f} {p['training_sleep']:7.2f} {p['gloo_loop']:10.2f} "
                      f"{p['rank_other']:6.2f} {p['switches']:8.1f} {p['outside']:10.2f} {p['idle']:6.2f}",
                      flush=True)


def same_computation(reference, other, keys=("first_loss", "last_loss")):
    """Same weights, data and optimizer give the same losses, up to float order."""
    return all(abs(reference[k] - other[k]) <= 1e-4 * max(1.0, abs(reference[k])) for k in keys)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cxx", help="the built fabric_bench_side_by_side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", default="mlp,lm,wide")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--profile", action="store_true",
                        help="instead of timing rounds, trace each implementation once under perf sched "
                             "and say where each rank's time goes during the timed steps")
    parser.add_argument("--impls", default=",".join(IMPLEMENTATIONS),
                        help="with --profile: the implementations to trace (also: "
                             + ", ".join(EXTRA_IMPLEMENTATIONS) + ")")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--impl", default="lightning", help=argparse.SUPPRESS)
    parser.add_argument("--devices", type=int, default=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if not args.cxx or not os.access(args.cxx, os.X_OK):
        sys.exit("side by side: --cxx must name the built fabric_bench_side_by_side (bench/side_by_side.sh builds it)")
    models = args.models.split(",")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        sys.exit(f"side by side: unknown models {unknown}; choose from {sorted(MODELS)}")
    if args.warmup < 1 or args.steps < 2:
        sys.exit("side by side: --warmup must be at least 1 and --steps at least 2")
    if args.profile:
        profile_main(args, models)
        return

    runs = {(m, i): [] for m in models for i in IMPLEMENTATIONS}
    for round_index in range(args.rounds):
        shift = round_index % len(IMPLEMENTATIONS)
        order = IMPLEMENTATIONS[shift:] + IMPLEMENTATIONS[:shift]
        print(f"round {round_index + 1}/{args.rounds} (order: {', '.join(order)})", flush=True)
        for model in models:
            for impl in order:
                runs[(model, impl)].append(run_one(args, model, impl))

    problems = []
    first = runs[(models[0], "lightning")][0]
    print(f"\ntorch {first['torch']}, {first['ranks']} ranks x {first['threads']} thread, Gloo on 127.0.0.1, "
          f"{args.steps} timed steps after {args.warmup}, {args.rounds} rounds; "
          "step time: median over rounds of each run's median (a step = its slowest rank); "
          "sync: step time minus its language's floor (python-local, cxx-local)")
    print(f"{'model':6} {'implementation':14} {'params':>8} {'step ms':>9} {'sync ms':>8} {'vs Lightning':>13} "
          f"{'vs Reducer':>11} {'fwd/bwd/opt ms':>20} {'peak MiB/rank':>14} {'base MiB':>9}")
    for model in models:
        median = {i: statistics.median(r["median_ms"] for r in runs[(model, i)]) for i in IMPLEMENTATIONS}
        for impl in IMPLEMENTATIONS:
            last = runs[(model, impl)]
            peak = max(r["peak_rss_mib"] for r in last)
            base = max(r["base_rss_mib"] for r in last)
            sync = median[impl] - median[FLOOR.get(impl, "cxx-local")]
            phases = "/".join(f"{statistics.median(r[k] for r in last):.2f}"
                              for k in ("forward_ms", "backward_ms", "optimizer_ms"))
            print(f"{model:6} {impl:14} {last[0]['parameters'] / 1e6:7.2f}M {median[impl]:9.3f} {sync:8.3f} "
                  f"{median[impl] / median['lightning']:13.3f} {median[impl] / median['reducer']:11.3f} "
                  f"{phases:>20} {peak:14.1f} {base:9.1f}")
            # The floors train each rank alone: they share the first loss
            # with the synchronized runs, and their last with each other.
            reference = "python-local" if impl.endswith("-local") else "lightning"
            for measured in last:
                if not (same_computation(runs[(model, reference)][0], measured)
                        and same_computation(runs[(model, "lightning")][0], measured, ("first_loss",))):
                    problems.append(f"{model} {impl}: losses {measured['first_loss']:.8g} -> "
                                    f"{measured['last_loss']:.8g}, {reference}'s "
                                    f"{runs[(model, reference)][0]['first_loss']:.8g} -> "
                                    f"{runs[(model, reference)][0]['last_loss']:.8g}: not the same computation")
        vs_lightning = median["fabric-ddp"] / median["lightning"]
        vs_reducer = median["fabric-ddp"] / median["reducer"]
        peak_of = {i: max(r["peak_rss_mib"] for r in runs[(model, i)]) for i in ("fabric-ddp", "lightning")}
        memory = peak_of["fabric-ddp"] / peak_of["lightning"]
        zero2 = median["fabric-zero2"] / median["fabric-ddp"]
        verdict = lambda ratio, target: f"{ratio:.3f} {'met' if ratio <= target else 'MISSED'}"
        print(f"  target: fabric-ddp <= {TARGET_VS_LIGHTNING[model]}x Lightning: "
              f"{verdict(vs_lightning, TARGET_VS_LIGHTNING[model])}; "
              f"<= {TARGET_VS_REDUCER}x the Reducer loop: {verdict(vs_reducer, TARGET_VS_REDUCER)}; "
              f"peak memory <= {TARGET_MEMORY_VS_LIGHTNING}x Lightning's: "
              f"{verdict(memory, TARGET_MEMORY_VS_LIGHTNING)}; "
              f"fabric-zero2 <= {TARGET_ZERO2_VS_DDP}x fabric-ddp: {verdict(zero2, TARGET_ZERO2_VS_DDP)}")
    if problems:
        print("\n".join(["", "SIDE BY SIDE FAILED:"] + problems), flush=True)
        sys.exit(1)
    print("\nevery run's losses agree with Lightning's, the floors' with python-local's (the same computation)")


if __name__ == "__main__":
    main()
