#!/usr/bin/python3
"""Per-rank optimizer-state and gradient memory, and step time, of the
sharded strategies against ddp, measured side by side in one run:

  python3 bench/compare_strategies.py BUILD/bin/fabric_bench_strategy \\
      [--devices 2] [--steps 30] [--width 1024] [--layers 6] [--rounds 2]

Runs fabric_bench_strategy for ddp, zero1 and zero2 in turn, `rounds`
times (interleaved, best step time of each), and prints the largest
per-rank Adam state and gradient bytes, the step times, and their ratios
to ddp. Memory figures are exact byte counts of the tensors each rank
holds; step times depend on the machine and its load.
"""
import argparse
import os
import re
import subprocess
import sys

STRATEGIES = ("ddp", "zero1", "zero2")


def run(binary, strategy, arguments):
    command = [binary, f"--strategy={strategy}", f"--devices={arguments.devices}",
               f"--steps={arguments.steps}", f"--width={arguments.width}",
               f"--layers={arguments.layers}"]
    output = subprocess.run(command, capture_output=True, text=True, check=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1")).stdout
    line = next(line for line in output.splitlines() if line.startswith("strategy="))
    return {key: value for key, value in re.findall(r"(\w+)=(\S+)", line)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("fabric_bench_strategy")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    arguments = parser.parse_args()

    results = {}
    for _ in range(arguments.rounds):
        for strategy in STRATEGIES:
            result = run(arguments.fabric_bench_strategy, strategy, arguments)
            best = results.get(strategy)
            if best is None or float(result["step_ms"]) < float(best["step_ms"]):
                results[strategy] = result

    ddp = results["ddp"]
    print(f"{arguments.devices} ranks, MLP of {arguments.layers} x Linear({arguments.width}, "
          f"{arguments.width}), {int(ddp['parameter_bytes']) / 2**20:.1f} MiB of parameters, "
          f"Adam, batch 32 per rank, best of {arguments.rounds} runs x 3 rounds")
    print(f"{'strategy':9} {'state MiB/rank':>15} {'ratio':>6} {'grads MiB/rank':>15} "
          f"{'ratio':>6} {'step ms':>9} {'ratio':>6}")
    for strategy in STRATEGIES:
        result = results[strategy]
        state = int(result["state_bytes"])
        gradients = int(result["gradient_bytes"])
        step = float(result["step_ms"])
        print(f"{strategy:9} {state / 2**20:15.2f} {state / int(ddp['state_bytes']):6.2f} "
              f"{gradients / 2**20:15.2f} {gradients / int(ddp['gradient_bytes']):6.2f} "
              f"{step:9.2f} {step / float(ddp['step_ms']):6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
