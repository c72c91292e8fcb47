#!/usr/bin/env python3
"""The speed-up of a migration that splits the data (issue 37): repository-
shaped single-device programs (bench/data_sharding/: a shared utils/ loader
class used by a project folder, whole data-set tensors sliced by hand, an
iteration-based trainer drawing random batches) migrated by fabricize,
built against the runtime, and run on 1 and on 2 ranks, one intra-op
thread per rank, the same epochs (or steps). Printed: each run's wall time,
the throughput ratio (samples per second on 2 ranks over 1 rank: the time
ratio where the data is split, twice it where each rank draws its own
batches), and what each rank processed (the runtime's share records: items
per pass on each rank, and each rank's backward passes). Not a test: the
ratio moves with the machine's load; rounds alternate the runs.

  bench/data_sharding.py --fabricize build/bin/fabricize --fabric-dir build [--rounds 2] [--small-steps] [--quick]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
E2E = os.path.join(ROOT, "test", "e2e", "run_e2e.py")

# name, source, arguments (compute-bound, small steps, quick), how the ranks
# share the work. Arguments: epochs (steps), samples, hidden width, batch.
PROGRAMS = [
    ("mlp", os.path.join(HERE, "data_sharding", "repo", "projects", "mlp"),
     ["12", "32768", "512", "2048"], ["3", "16384", "256", "64"], ["1", "512", "32", "64"], "split",
     "a project folder of a repository, batches from utils/'s loader class (sharded where it is defined)"),
    ("hand_sliced", os.path.join(HERE, "data_sharding", "hand_sliced", "train.cpp"),
     ["12", "32768", "512", "2048"], ["3", "16384", "256", "64"], ["1", "512", "32", "64"], "split",
     "whole data-set tensors sliced by hand over a per-epoch permutation (fabric.shard_range, fabric.randperm)"),
    ("randint", os.path.join(HERE, "data_sharding", "randint", "train.cpp"),
     ["200", "32768", "512", "2048"], ["800", "16384", "256", "64"], ["100", "512", "32", "64"], "per_rank",
     "random batches drawn each step (fabric.per_rank_random): each rank its own, as many steps"),
]


def run(cmd, env=None, timeout=1800):
    started = time.time()
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    return result, time.time() - started


def records(folder):
    """Per rank: its backward passes and its share lines (site -> (total, mine))."""
    out = {}
    for name in sorted(os.listdir(folder)):
        m = re.match(r"rank(\d+)\.txt$", name)
        if not m:
            continue
        losses, shares = 0, {}
        with open(os.path.join(folder, name)) as f:
            for line in f:
                words = line.split()
                if words[:1] == ["loss"]:
                    losses += 1
                elif words[:1] == ["share"] and len(words) == 4:
                    shares[words[1]] = (int(words[2]), int(words[3]))
        out[int(m.group(1))] = (losses, shares)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fabricize", required=True)
    parser.add_argument("--fabric-dir", required=True, help="the build (or install) folder with FabricConfig.cmake")
    parser.add_argument("--work", default=None, help="default: <fabric-dir>/bench-data-sharding")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--small-steps", action="store_true",
                        help="small models and batches (64): a step too short for the gradient all-reduce to hide")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a dry run of the bench itself)")
    args = parser.parse_args()
    work = os.path.abspath(args.work or os.path.join(args.fabric_dir, "bench-data-sharding"))
    os.makedirs(work, exist_ok=True)

    prepare = [sys.executable, E2E, "prepare", "--fabricize", os.path.abspath(args.fabricize),
               "--fabric-dir", os.path.abspath(args.fabric_dir), "--work", work]
    for name, source, *_ in PROGRAMS:
        prepare += ["--program", f"{name}={source}"]
    print("bench: migrating and building " + ", ".join(p[0] for p in PROGRAMS) + " ...", flush=True)
    made, took = run(prepare, timeout=3600)
    if made.returncode != 0:
        sys.stdout.write(made.stdout[-4000:] + made.stderr[-4000:])
        print("bench: migrating or building failed", file=sys.stderr)
        return 2
    print(f"bench: built in {took:.0f} s", flush=True)
    with open(os.path.join(work, "programs.json")) as f:
        binaries = json.load(f)

    rows = []
    for name, _, full, small, quick, share, what in PROGRAMS:
        argv = quick if args.quick else small if args.small_steps else full
        times = {1: [], 2: []}
        shares = {}
        for round_ in range(args.rounds):
            for devices in (1, 2) if round_ % 2 == 0 else (2, 1):
                folder = os.path.join(work, "runs", name, f"{devices}-{round_}")
                shutil.rmtree(folder, ignore_errors=True)
                os.makedirs(folder)
                env = dict(os.environ, LT_ACCELERATOR="cpu", LT_DEVICES=str(devices), OMP_NUM_THREADS="1",
                           FABRIC_VERIFY_RECORD=folder)
                result, seconds = run([binaries[name]["fabric"], *argv], env=env)
                if result.returncode != 0:
                    sys.stdout.write(result.stdout[-2000:] + result.stderr[-2000:])
                    print(f"bench: {name} on {devices} ranks exited {result.returncode}", file=sys.stderr)
                    return 2
                times[devices].append(seconds)
                shares[devices] = records(folder)
        one, two = min(times[1]), min(times[2])
        ratio = one / two * (2 if share == "per_rank" else 1)
        rows.append((name, what, one, two, ratio, share, shares))

    print()
    print("| program | 1 rank s | 2 ranks s | throughput 2 ranks / 1 rank | per rank (2 ranks) |")
    print("|---|---|---|---|---|")
    for name, what, one, two, ratio, share, shares in rows:
        per_rank = []
        for rank, (losses, sites) in sorted(shares[2].items()):
            items = ", ".join(f"{mine} of {total} per pass" for _, (total, mine) in sorted(sites.items()))
            per_rank.append(f"rank {rank}: {losses} backward passes" + (f", {items}" if items else ""))
        single = shares[1].get(0, (0, {}))[0]
        print(f"| {name} | {one:.2f} | {two:.2f} | {ratio:.2f}x | {'; '.join(per_rank)} (1 rank: {single}) |")
    print()
    for name, what, *_ in rows:
        print(f"- {name}: {what}")
    print("throughput: samples per second over all ranks; split data: the 1-rank time over the 2-rank time; "
          "per-rank draws: twice that (each rank trains on as many samples as one process)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
