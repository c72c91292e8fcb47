#!/usr/bin/python3
"""Peak resident memory per rank (VmHWM) and losses of ddp, zero2 and fsdp,
measured side by side in one run:

  python3 bench/compare_memory.py BUILD/bin/fabric_bench_memory \\
      [--ranks 2 4] [--steps 12] [--width 2048] [--layers 10]

For each rank count, runs fabric_bench_memory for every strategy in turn
and prints the largest rank's peak resident memory, its ratio to ddp's in
the same run, the step time and its ratio, and the largest relative
difference of the per-step global losses from ddp's. Exits 1 when a
strategy's losses differ from ddp's by more than --loss-tolerance.
"""
import argparse
import os
import re
import subprocess
import sys

# fsdp fixes glibc's mmap threshold at 1 MiB itself (docs/runtime.md,
# "fsdp"), so that the units it frees go back to the system; "ddp, 1 MiB
# mmap" runs ddp with the same allocator setting, to show what of the
# saving is the allocator's.
RUNS = (("ddp", "ddp", {}),
        ("ddp, 1 MiB mmap", "ddp", {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=1048576"}),
        ("zero2", "zero2", {}),
        ("fsdp", "fsdp", {}))


def run(binary, strategy, environment, ranks, arguments):
    command = [binary, f"--strategy={strategy}", f"--devices={ranks}", f"--steps={arguments.steps}",
               f"--width={arguments.width}", f"--layers={arguments.layers}"]
    completed = subprocess.run(command, capture_output=True, text=True,
                               env=dict(os.environ, OMP_NUM_THREADS="1", **environment))
    if completed.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({completed.returncode}):\n{completed.stderr}")
    line = next(line for line in completed.stdout.splitlines() if line.startswith("strategy="))
    result = dict(re.findall(r"(\w+)=(\S+)", line))
    result["losses"] = [float(value) for value in result["losses"].split(",")]
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("fabric_bench_memory")
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=10)
    parser.add_argument("--loss-tolerance", type=float, default=1e-3)
    arguments = parser.parse_args()

    worst = 0.0
    for ranks in arguments.ranks:
        results = {name: run(arguments.fabric_bench_memory, strategy, environment, ranks, arguments)
                   for name, strategy, environment in RUNS}
        ddp = results["ddp"]
        print(f"{ranks} ranks, MLP of {arguments.layers} x Linear({arguments.width}, {arguments.width}): "
              f"{int(ddp['parameters']) / 1e6:.1f}M parameters, Adam, {arguments.steps} steps, CPU Gloo")
        print(f"{'strategy':16} {'peak MiB/rank':>14} {'ratio':>6} {'step ms':>9} {'ratio':>6} "
              f"{'max loss rel. diff':>19}")
        for name, _, _ in RUNS:
            result = results[name]
            peak = int(result["vmhwm_kib"]) / 1024
            step = float(result["step_ms"])
            difference = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(result["losses"], ddp["losses"]))
            worst = max(worst, difference)
            print(f"{name:16} {peak:14.0f} {peak / (int(ddp['vmhwm_kib']) / 1024):6.2f} {step:9.1f} "
                  f"{step / float(ddp['step_ms']):6.2f} {difference:19.2e}")
        print(f"ddp losses: {', '.join(f'{loss:.6f}' for loss in ddp['losses'])}")
        print()
    if worst > arguments.loss_tolerance:
        print(f"FAILED: losses differ from ddp's by {worst:.2e} (tolerance {arguments.loss_tolerance:.0e})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
