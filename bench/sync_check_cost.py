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
    return float(re.search(r"run_ms=(\S+)", line).group(1))


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
    for _ in range(arguments.rounds):
        for name, width, layers in MODELS:
            for strategy in strategies:
                for mode_name, mode in MODES:
                    times.setdefault((name, strategy, mode_name), []).append(
                        run(arguments.fabric_bench_strategy, strategy, width, layers, mode, arguments))
    run_steps = 1 + 3 * (3 + arguments.steps)
    print(f"{arguments.devices} ranks, {run_steps} steps per run, median of {arguments.rounds} interleaved runs; "
          f"run_ms: mean step time over the whole run")
    print(f"{'model':11} {'strategy':9} {'check':11} {'run_ms':>8} {'vs off':>7}")
    for name, _, _ in MODELS:
        for strategy in strategies:
            off = statistics.median(times[(name, strategy, "off")])
            for mode_name, _ in MODES:
                value = statistics.median(times[(name, strategy, mode_name)])
                print(f"{name:11} {strategy:9} {mode_name:11} {value:8.3f} {value / off:7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
