#!/usr/bin/env python3
"""Issue 37: the data-sharding checks that need several runs of
test/runtime/data_sharding_program.cpp.

  data_sharding_driver.py duplicates PROGRAM
      2 ranks on the same batches: rank 0 prints the duplicate-data line
      exactly once; on sharded batches, or with a constant loss: never.
  data_sharding_driver.py before_launch PROGRAM
      fabric::shard, fabric::global_rank and fabric::world_size before any
      Fabric, in a process whose environment says WORLD_SIZE=2: each throws
      std::logic_error saying what to do, and the process exits non-zero
      within seconds; without the variable: one process, exit code 0.
  data_sharding_driver.py resume PROGRAM
      per_rank_random streams saved with a fabric::RandomState and loaded in
      a new job (also while a guard is alive): every rank's draws after the
      load equal the uninterrupted run's, bit for bit.
"""
import os
import re
import subprocess
import sys
import tempfile
import time

LINE = "fabric: every rank computed the same loss at backward passes"


def fail(message):
    print(f"DATA SHARDING DRIVER FAILED: {message}", flush=True)
    sys.exit(1)


def clean_environment(**extra):
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK",
                                "MASTER_ADDR", "MASTER_PORT", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE")
                   and not k.startswith("LT_")}
    environment.update(extra)
    return environment


def run(command, timeout=120, **extra):
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=clean_environment(**extra))
    return result, time.monotonic() - started


def duplicates(program):
    for data, expected in (("same", 1), ("sharded", 0), ("constant", 0)):
        result, _ = run([program, "duplicate", "--devices=2", f"--data={data}", "--steps=60"])
        if result.returncode != 0:
            fail(f"--data={data} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
        found = result.stderr.count(LINE)
        if found != expected:
            fail(f"--data={data}: the duplicate-data line appeared {found} times, expected {expected}:\n"
                 f"{result.stderr}")
        if expected:
            line = next(l for l in result.stderr.splitlines() if LINE in l)
            for words in ("backward passes 3, 5 and 9", "the ranks are training on the same batches",
                          "2 times the compute", "fabric.shard_range", "fabric.shard_elements", "fabric::shard",
                          "fabric.per_rank_random()", "fabric-own-dataloader", "fabric.setup_dataloader"):
                if words not in line:
                    fail(f"the duplicate-data line lacks '{words}':\n{line}")
        cost = re.search(r"^duplicate check cost: .*$", result.stdout, re.M)
        print(f"--data={data}: {found} line(s); {cost.group(0) if cost else 'no cost line'}")
    print("data sharding driver: duplicates passed")


def before_launch(program):
    result, seconds = run([program, "before_launch"], timeout=60, WORLD_SIZE="2")
    if result.returncode != 3:
        fail(f"WORLD_SIZE=2: exit code {result.returncode}, expected 3:\n{result.stdout}\n{result.stderr}")
    if seconds > 20:
        fail(f"WORLD_SIZE=2: took {seconds:.1f} s")
    for name in ("fabric::shard", "fabric::global_rank", "fabric::world_size"):
        wanted = (f"caught: {name} was called before fabric.launch() in a job of 2 processes: this process does not "
                  "know its rank yet")
        if wanted not in result.stderr:
            fail(f"WORLD_SIZE=2: no '{wanted}' in:\n{result.stderr}")
    if "fabricize puts both at the top of main" not in result.stderr:
        fail(f"the message does not say what to do:\n{result.stderr}")
    single, _ = run([program, "before_launch"], timeout=60)
    if single.returncode != 0 or "before_launch passed (one process)" not in single.stdout:
        fail(f"one process: exit code {single.returncode}:\n{single.stdout}\n{single.stderr}")
    print(f"data sharding driver: before_launch passed ({seconds:.2f} s to the error)")


def lines_of(path):
    with open(path) as f:
        return [line.rstrip("\n") for line in f]


def resume(program):
    devices = 2
    for inside in ("0", "1"):
        with tempfile.TemporaryDirectory(prefix="fabric_random_resume_") as folder:
            for phase in ("full", "first", "second"):
                result, _ = run([program, "random_resume", f"--devices={devices}", f"--dir={folder}",
                                 f"--phase={phase}", f"--inside={inside}"])
                if result.returncode != 0:
                    fail(f"--phase={phase} --inside={inside} exited {result.returncode}:\n{result.stdout}\n"
                         f"{result.stderr}")
            owns = []
            for rank in range(devices):
                full = lines_of(os.path.join(folder, f"full_rank{rank}.txt"))
                first = lines_of(os.path.join(folder, f"first_rank{rank}.txt"))
                second = lines_of(os.path.join(folder, f"second_rank{rank}.txt"))
                if len(full) != 12 or first != full[:6]:
                    fail(f"--inside={inside} rank {rank}: the first phase is not the full run's start:\n"
                         f"{first}\n{full}")
                if second != full[6:]:
                    fail(f"--inside={inside} rank {rank}: after the load the draws differ from the "
                         f"uninterrupted run's:\n" + "\n".join(second) + "\nexpected:\n" + "\n".join(full[6:]))
                owns.append([line for line in full if " own " in line])
            shared = [[line for line in lines_of(os.path.join(folder, f"full_rank{r}.txt")) if " shared " in line]
                      for r in range(devices)]
            if shared[0] != shared[1]:
                fail("the shared draws differ between the ranks")
            if owns[0][0].split()[3:7] == owns[1][0].split()[3:7]:
                fail("the per-rank draws are the same on both ranks")
    print("data sharding driver: resume passed")


def main():
    if len(sys.argv) != 3:
        fail("usage: data_sharding_driver.py duplicates|before_launch|resume PROGRAM")
    command, program = sys.argv[1], sys.argv[2]
    {"duplicates": duplicates, "before_launch": before_launch, "resume": resume}[command](program)


if __name__ == "__main__":
    main()
