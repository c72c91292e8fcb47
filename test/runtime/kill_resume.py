#!/usr/bin/env python3
"""Kill-and-resume (issue 27 point 5), with real processes and SIGKILL.

  kill_resume.py PROGRAM --devices N [--seed S]

1. PROGRAM (test/runtime/resume_program.cpp) runs to its end: the hash of
   its final parameters is the reference.
2. It runs again, saving a fabric::State after every step, and the whole
   job (every rank) is killed with SIGKILL at a random step in the middle
   of an epoch; no process of it may be left.
3. It starts again with --resume: it must continue after the last step it
   saved (not from the start) and end with the reference hash, bit for bit.
With one rank it also proves the test can fail: leaving the loader's place,
the random generators or the schedule out of the State changes the final
parameters.
"""
import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time

STEPS_PER_EPOCH = {1: 26, 2: 13, 3: 9}  # ceil(203 / 8 / ranks)


def fail(message):
    print(f"KILL-RESUME FAILED: {message}", flush=True)
    sys.exit(1)


def run(program, devices, checkpoint, *extra, timeout=300):
    result = subprocess.run([program, f"--devices={devices}", f"--checkpoint={checkpoint}", *extra],
                            capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        fail(f"{' '.join(extra) or 'the run'} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def final_hash(output):
    # A strategy chosen through LT_STRATEGY must be the one that ran.
    wanted = os.environ.get("LT_STRATEGY")
    if wanted and not re.search(rf"^strategy {re.escape(wanted)}$", output, re.M):
        fail(f"LT_STRATEGY={wanted}, but the program did not run with it:\n{output}")
    found = re.search(r"^final ([0-9a-f]{16}) steps (\d+)$", output, re.M)
    if not found:
        fail(f"no final line in:\n{output}")
    return found.group(1), int(found.group(2))


def steps_printed(output):
    return [int(s) for s in re.findall(r"^step (\d+)$", output, re.M)]


def kill_at(program, devices, checkpoint, kill_step, *extra):
    """Starts the job in its own process group and SIGKILLs all of it once
    it has printed `step kill_step`."""
    job = subprocess.Popen([program, f"--devices={devices}", f"--checkpoint={checkpoint}", *extra],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 120
    for line in job.stdout:
        if line.strip() == f"step {kill_step}":
            os.killpg(job.pid, signal.SIGKILL)
            break
        if time.time() > deadline:
            break
    else:
        fail(f"the job ended before step {kill_step}")
    job.wait(timeout=30)
    if job.returncode != -signal.SIGKILL:
        fail(f"the killed job's exit status is {job.returncode}, not SIGKILL")
    for _ in range(50):
        left = subprocess.run(["pgrep", "-f", checkpoint], capture_output=True, text=True).stdout.split()
        if not left:
            return
        time.sleep(0.1)
    fail(f"processes of the killed job are still alive: {left}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("program")
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    per_epoch = STEPS_PER_EPOCH[args.devices]
    with tempfile.TemporaryDirectory(prefix="fabric-kill-resume-") as work:
        reference_output = run(args.program, args.devices, os.path.join(work, "reference.pt"))
        reference, total = final_hash(reference_output)
        # A step strictly inside an epoch (not its first or last), past the first epoch.
        epoch = rng.randrange(1, 3)
        kill_step = epoch * per_epoch + rng.randrange(2, per_epoch - 1)
        print(f"{args.devices} rank(s), {total} steps; killing at step {kill_step} (seed {seed})", flush=True)
        checkpoint = os.path.join(work, "run.pt")
        kill_at(args.program, args.devices, checkpoint, kill_step)
        resumed_output = run(args.program, args.devices, checkpoint, "--resume")
        steps = steps_printed(resumed_output)
        if not steps or steps[0] <= kill_step:
            fail(f"the resumed run did not continue after step {kill_step}: its first step is "
                 f"{steps[0] if steps else None}")
        resumed, resumed_total = final_hash(resumed_output)
        if resumed_total != total:
            fail(f"the resumed run ended at step {resumed_total}, the reference at {total}")
        if resumed != reference:
            fail(f"resumed from step {steps[0] - 1}: final parameters {resumed}, uninterrupted {reference}")
        print(f"resumed at step {steps[0]}: final parameters {resumed}, equal to the uninterrupted run's", flush=True)
        if args.devices == 1:
            # Without the loader's place (the epoch restarts), the generators
            # (other dropout masks) or the schedule's step count (the learning
            # rate decays at other epochs), the continuation is not the same.
            omissions = ["loader", "rng", "scheduler", "generator"]
            # LibTorch 2.x: the plateau schedule's counters too.
            if re.search(r"^plateau scheduler$", reference_output, re.M):
                omissions.append("plateau")
            for omitted in omissions:
                partial = os.path.join(work, f"without-{omitted}.pt")
                kill_at(args.program, 1, partial, kill_step, f"--omit={omitted}")
                out = run(args.program, 1, partial, "--resume", f"--omit={omitted}")
                if final_hash(out)[0] == reference:
                    fail(f"a State without '{omitted}' resumed to the same parameters: the test cannot tell")
                print(f"without '{omitted}' in the State the resumed run differs, as it must", flush=True)
    print("KILL-RESUME PASSED", flush=True)


if __name__ == "__main__":
    main()
