#!/usr/bin/env python3
"""Tests of `fabricize verify`: it passes equivalent migrations and catches
broken ones, each case its own ctest.

  verify_test.py --fabricize BIN --work DIR --case NAME [--source PATH]

Cases (the broken migrations are made here from fabricize's own migration of
Inputs/classifier/train.cpp by one textual change, which must apply):
  equivalent           the classifier, migrated by fabricize: exit 0, every check passes
  program              --source: a program or a CMake project folder (the
                       bundled example, the shared corpus): exit 0
  optimizer_not_set_up `fabric.setup(model, optimizer)` deleted: ranks' parameters differ
  metric_over_dataset  the all_reduce of the correct count deleted: rank 0's accuracy is
                       its shard's count over the whole data set (half)
  file_every_rank      the CSV log opened on every rank, and a command started with
                       popen on every rank that writes a file: each a file written
                       by 2 ranks (a rank's child processes count as the rank)
  runtime_random       a random number drawn right after setup (what a runtime that
                       drew one there would do): the 1-rank records differ
  divergent_stop       test/shapes/early_stop (stops on a per-rank loss): the 2-rank
                       job ends early, with the runtime's message and the finding
  data_not_split       Inputs/full_batch: full-batch training, which fabricize reports
                       and cannot split: both ranks compute the same losses, and
                       verify names the loop
  cannot_build         the migration does not compile: exit 2
  hang                 the migration sleeps after its 3rd step: each run is killed at the
                       time limit and reported with the step where it stopped
Exit 77 (ctest's skip code) with a loud message when an input is missing.
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
CLASSIFIER = os.path.join(HERE, "Inputs", "classifier", "train.cpp")
EARLY_STOP = os.path.join(HERE, "..", "shapes", "early_stop", "train.cpp")
FULL_BATCH = os.path.join(HERE, "Inputs", "full_batch", "train.cpp")

# case -> (pattern, replacement) applied once to the migrated train.cpp
MUTATIONS = {
    "optimizer_not_set_up": (r"\n *fabric\.setup\(model, optimizer\);", ""),
    "metric_over_dataset": (r"\n *correct = fabric\.all_reduce\(correct, fabric::ReduceOp::Sum\);", ""),
    "file_every_rank": [(r"fabric\.rank_zero_ofstream\(\"train_log\.csv\"\)", "\"train_log.csv\""),
                        (r"fabric\.step\(optimizer\);",
                         "fabric.step(optimizer);\n      if (FILE* plot = popen(\"cat > loss_plot.txt\", \"w\")) "
                         "{ fputs(\"plot\", plot); pclose(plot); }")],
    "runtime_random": (r"fabric\.setup\(model, optimizer\);",
                       "fabric.setup(model, optimizer);\n  (void)torch::rand({1});"),
    "cannot_build": (r"fabric\.backward\(loss\);", "fabric.backward(loss) this does not compile;"),
    # Both ranks (and the 1-process run) stop forever after their 3rd step.
    "hang": (r"fabric\.step\(optimizer\);",
             "fabric.step(optimizer);\n      if (batches == 2) std::this_thread::sleep_for(std::chrono::hours(1));"),
}
# case -> (exit code, the check that must fail or None, text its output must hold)
EXPECT = {
    "equivalent": (0, None, "verdict: equivalent"),
    "program": (0, None, "verdict: equivalent"),
    "optimizer_not_set_up": (1, "two-ranks-parameters", "no fabric.setup(...) call"),
    "metric_over_dataset": (1, "two-ranks-metrics", "train.cpp:"),
    "file_every_rank": (1, "two-ranks-files", ("train_log.csv is written by ranks 0, 1",
                                               "loss_plot.txt is written by ranks 0, 1")),
    "runtime_random": (1, "one-rank-records", "the first loss already differs"),
    "divergent_stop": (1, "two-ranks-run", "fabric-divergent-exit"),
    "data_not_split": (1, "two-ranks-data", "train.cpp:18: every step reads all of `X` (full-batch training)"),
    "cannot_build": (2, None, "does not compile"),
    "hang": (1, "two-ranks-run", "did not finish (killed after the time limit: a hang?) (rank 0 after step 3, rank 1 after step 3)"),
}


def fail(message):
    print(f"VERIFY TEST FAILED: {message}", flush=True)
    sys.exit(1)


def run(cmd, **kwargs):
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, text=True, capture_output=True, **kwargs)


def broken_migration(args, case):
    """fabricize's migration of the classifier with one change, as a CMake project."""
    folder = os.path.join(args.work, "migrated-" + case)
    shutil.rmtree(folder, ignore_errors=True)
    made = run([args.fabricize, CLASSIFIER, "-o", folder, "--emit-cmake", "--quiet"])
    if made.returncode not in (0, 1):
        fail(f"fabricize could not migrate {CLASSIFIER}:\n{made.stderr}")
    path = os.path.join(folder, "train.cpp")
    with open(path) as f:
        text = f.read()
    changes = MUTATIONS[case]
    changed = text
    for pattern, replacement in changes if isinstance(changes, list) else [changes]:
        changed, count = re.subn(pattern, replacement, changed)
        if count != 1:
            fail(f"{case}: the change {pattern!r} applies {count} times to the migration (expected once); "
                 f"has the migration's text changed?")
    with open(path, "w") as f:
        f.write(changed)
    return folder


def configured_project(args, folder):
    """A CMake project's build folder with compile_commands.json (what a user has)."""
    build = os.path.join(args.work, "project-build")
    made = run(["cmake", "-S", folder, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"] + args.cmake_arg)
    if made.returncode != 0:
        fail(f"configuring {folder} failed:\n{made.stdout[-3000:]}{made.stderr[-3000:]}")
    return build


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fabricize", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--case", required=True, choices=sorted(EXPECT))
    parser.add_argument("--source", help="for the program case: a source file or a CMake project folder")
    parser.add_argument("--args", default="", help="the program's arguments")
    parser.add_argument("--cmake-arg", action="append", default=[],
                        help="a CMake flag the project is configured with (also given to verify)")
    parser.add_argument("--inputs", help="the folder the program reads by relative path (verify --inputs)")
    # 48: the original prints 3 epochs of the classifier, 2 ranks 6, so each
    # has lines to compare.
    parser.add_argument("--steps", default="48")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)

    report = os.path.join(args.work, args.case + ".json")
    command = [args.fabricize, "verify", "--steps", args.steps, "--accelerator", "cpu",
               "--work", os.path.join(args.work, "verify"), "--report", report, "--timeout", "300"]
    env = dict(os.environ)
    if args.case == "program":
        source = os.path.abspath(args.source)
        if not os.path.exists(source):
            print(f"VERIFY TEST SKIPPED: {source} does not exist; this program was NOT verified", flush=True)
            sys.exit(77)
        if os.path.isdir(source):
            command += ["-p", configured_project(args, source)]
        else:
            command.append(source)
        if args.args:
            command += ["--args", args.args]
        command += ["--cmake-arg=" + flag for flag in args.cmake_arg]
        if args.inputs:
            command += ["--inputs", args.inputs]
    elif args.case == "divergent_stop":
        command += [EARLY_STOP, "--steps", "2000"]
    elif args.case == "data_not_split":
        command += [FULL_BATCH, "--steps", "60"]
    else:
        command.append(CLASSIFIER)
        if args.case in MUTATIONS:
            command += ["--migrated", broken_migration(args, args.case)]

    if args.case == "hang":
        command[command.index("--timeout") + 1] = "20"
    result = run(command, env=env, timeout=1500)
    output = result.stdout + result.stderr
    print(output, flush=True)
    code, failing, text = EXPECT[args.case]
    if result.returncode != code:
        fail(f"{args.case}: fabricize verify exited {result.returncode}, expected {code}")
    for wanted_text in text if isinstance(text, tuple) else (text,):
        if wanted_text not in output:
            fail(f"{args.case}: the output does not say {wanted_text!r}")
    if code == 2:
        return
    with open(report) as f:
        checks = json.load(f)["checks"]
        verdicts = {c["id"]: c["verdict"] for c in checks}
    # A strategy chosen with LT_STRATEGY (as a user switches a migrated
    # program) must be the one the 2-rank run trained with.
    wanted = os.environ.get("LT_STRATEGY")
    if wanted:
        details = " ".join(" ".join(c.get("details", [])) for c in checks if c["id"] == "two-ranks-run")
        if f"strategy '{wanted}'" not in details:
            fail(f"LT_STRATEGY={wanted}, but the 2-rank run did not report it: {details!r}")
    stem = os.path.splitext(report)[0]
    with open(stem + ".md") as f:
        summary = f.read()
        if "# fabricize verify" not in summary or f"]({os.path.basename(stem)}.svg)" not in summary:
            fail("the Markdown summary is missing its title or its loss curves")
    # The pictures: the loss curves (.svg), and the page with them (.html):
    # the original's and the 1-process run's curves at least.
    with open(stem + ".svg") as f:
        curves = f.read()
    with open(stem + ".html") as f:
        page = f.read()
    if curves.count('<polyline class="series"') < 2 or "<svg" not in page or "fabricize verify" not in page:
        fail(f"{args.case}: the loss curves or the HTML report are missing or empty ({stem}.svg, {stem}.html)")
    if failing is None:
        bad = {k: v for k, v in verdicts.items() if v == "fail"}
        if bad:
            fail(f"{args.case}: checks failed: {bad}")
        # The checks that prove a migration must have run.
        for check in ("one-rank-records", "one-rank-console", "two-ranks-parameters", "two-ranks-loss"):
            if verdicts.get(check) != "pass":
                fail(f"{args.case}: {check} is {verdicts.get(check)!r}, expected pass")
    else:
        if verdicts.get(failing) != "fail":
            fail(f"{args.case}: check {failing} is {verdicts.get(failing)!r}, expected fail ({verdicts})")
        # A broken migration still builds and runs: the 1-rank checks of a
        # 2-rank fault stay green (the fault is found where it is).
        if args.case not in ("runtime_random", "hang") and verdicts.get("one-rank-records") != "pass":
            fail(f"{args.case}: one-rank-records is {verdicts.get('one-rank-records')!r}, expected pass")
    if args.case == "hang":
        # Killed at the limit, and no rank left behind.
        for _ in range(20):
            left = subprocess.run(["pgrep", "-f", os.path.join(args.work, "verify", "build-migrated")],
                                  capture_output=True, text=True).stdout.split()
            if not left:
                break
            time.sleep(0.5)
        if left:
            fail(f"hang: processes of the killed job still run: {left}")
    if args.case == "equivalent":
        # The migration report this run wrote, kept for verify.report_in_browser:
        # the classifier's later cases share the work folder and remove it.
        shutil.copyfile(os.path.join(args.work, "verify", "migration.html"),
                        os.path.join(args.work, "equivalent.migration.html"))
    print(f"VERIFY TEST PASSED: {args.case}", flush=True)


if __name__ == "__main__":
    main()
