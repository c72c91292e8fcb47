#!/usr/bin/python3
"""What the sync check costs (issue 38 point 2), measured side by side:

  python3 bench/sync_check_cost.py BUILD/bin/fabric_bench_strategy \\
      [--devices 2] [--steps 100] [--rounds 5]

Runs fabric_bench_strategy (an MLP trained with Adam through fabric.backward
and fabric.step) with FABRIC_CHECK_SYNC=0 (off), unset (the default: sampled
checks, the interval doubling from 1 and kept at ~0.5% of the time between
checks, plus one when the Fabric ends) and =1 (every step), interleaved,
`rounds` times each, and prints the median mean step time over the whole
run (run_ms: every step from the first, so the early, dense checks count)
and its ratio to off. Target: the default within 1% of off.

The side-by-side ratio carries this machine's run-to-run noise (several
percent). So each run also reports what its checks took, measured around
them (fabric.sync_check_cost(): the checks and their wall time, gathers
included, the slowest rank); the default's "share" column is that time,
plus one more check for the one ~Fabric runs at the end, over the run's
training time: the check's cost without the noise of a second run.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

MODES = (("off", "0"), ("default", None), ("every step", "1"))
MODELS = (("mlp 6x1024", 1024, 6), ("mlp 4x256", 256, 4))


def run(binary, strategy, width, layers, mode, arguments):
    environment = {k: v for k, v in os.environ.items() if k != "FABRIC_CHECK_SYNC"}
    environment["OMP_NUM_THREADS"] = "1"
    if mode is not None:
        environment["FABRIC_CHECK_SYNC"] = mode
    command = [binary, f"--strategy={strategy}", f"--devices={arguments.devices}", f"--steps={arguments.steps}",
               f"--width={width}", f"--layers={layers}"]
    completed = subprocess.run(command, capture_output=True, text=True, env=environment)
    if completed.returncode != 0:
        sys.exit(f"{' '.join(command)} (FABRIC_CHECK_SYNC={mode}) exited {completed.returncode}:\n"
                 f"{completed.stderr}")
    line = next(line for line in completed.stdout.splitlines() if line.startswith("strategy="))
    field = lambda name: float(re.search(rf"\b{name}=(\S+)", line).group(1))  # noqa: E731
    checks, check_s, run_s = field("checks"), field("check_s"), field("run_s")
    # The default's end check (in ~Fabric) is not in the run's figures: one
    # more of the same mean cost. (Every-step mode checks after each step only.)
    end_check = check_s / checks if checks and mode is None else 0
    share = (check_s + end_check) / run_s
    return field("run_ms"), share, int(checks)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("fabric_bench_strategy")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--strategies", default="ddp,zero2")
    arguments = parser.parse_args()
    strategies = arguments.strategies.split(",")
    times = {}
    shares = {}
    for _ in range(arguments.rounds):
        for name, width, layers in MODELS:
            for strategy in strategies:
                for mode_name, mode in MODES:
                    run_ms, share, checks = run(arguments.fabric_bench_strategy, strategy, width, layers, mode,
                                                arguments)
                    times.setdefault((name, strategy, mode_name), []).append(run_ms)
                    shares.setdefault((name, strategy, mode_name), []).append((share, checks))
    run_steps = 1 + 3 * (3 + arguments.steps)
    print(f"{arguments.devices} ranks, {run_steps} steps per run, median of {arguments.rounds} interleaved runs; "
          f"run_ms: mean step time over the whole run")
    print("share: the checks' own wall time (+1 for the end check) over the run's, median; checks: in the run")
    print(f"{'model':11} {'strategy':9} {'check':11} {'run_ms':>8} {'vs off':>7} {'share':>7} {'checks':>6}")
    for name, _, _ in MODELS:
        for strategy in strategies:
            off = statistics.median(times[(name, strategy, "off")])
            for mode_name, _ in MODES:
                value = statistics.median(times[(name, strategy, mode_name)])
                measured = shares[(name, strategy, mode_name)]
                share = statistics.median(s for s, _ in measured)
                checks = statistics.median(c for _, c in measured)
                share_text = f"{100 * share:6.2f}%" if mode_name != "off" else f"{'-':>7}"
                print(f"{name:11} {strategy:9} {mode_name:11} {value:8.3f} {value / off:7.3f} {share_text} "
                      f"{checks:6.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
