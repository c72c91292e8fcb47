#!/usr/bin/env python3
"""End-to-end tests: migrate single-device LibTorch programs with fabricize,
build the originals and the migrated programs against the Fabric runtime
(through find_package(Fabric)), run each original, its migration on one
process and on two, and compare.

  run_e2e.py prepare --fabricize BIN --fabric-dir BUILD --work DIR --program NAME=SRC ...
  run_e2e.py run --work DIR --program NAME

`prepare` migrates (and checks that migrating again changes nothing), writes
one CMake project for all programs (one precompiled header) and builds it.
A program given as a directory is a CMake project of its own (NAME=DIR with
a CMakeLists.txt): it is configured, migrated whole through its
compile_commands.json (`fabricize --all -p`, its CMakeLists.txt included),
and the original and the migrated project are built with their own CMake
files (one precompiled <torch/torch.h> injected per target, for speed).
A project folder inside a repository (a folder above it has a PROJECTS file
listing it, one project folder per line) is taken as users take one: the
whole repository is copied and made a git work tree (`git init`, as a clone
is), the project is built from its own folder into <project>/build and
migrated from there (`cd <project> && fabricize --all -p build -o ...`); the
migrated tree mirrors the root fabricize chose (its report's "root"), and
the migrated project is configured at the project's place under it.
`run` runs one program three ways and checks:
  * 1 process: the same lines as the original, numbers within tolerance;
  * 2 processes: both ranks exit 0, rank 0 alone prints (no line twice),
    the loss falls, files the program saves are written once, by rank 0;
  * with --sync-check: both migrated runs set FABRIC_CHECK_SYNC=1, so the
    runtime compares every parameter across the ranks after every step, and
    the job must end with its "sync check passed" line (after at least one
    step on 2 ranks); and the last value of every metric the program prints
    after a loss or accuracy word on 2 ranks equals the 1-process run's after
    as many optimizer steps (interpolated) within LOSS_RTOL (losses) /
    ACC_ATOL (accuracies)
    (metrics keep their meaning: a sum over this rank's shard divided by the
    data set's size would be half the 1-process value).
  * with --also-strategy S (fsdp): the 2-process run again under
    LT_STRATEGY=S, as a user switches a migrated program, with the same
    checks (unless the manifest says S refuses the program, below).
A manifest (--manifest, JSON: {program: {...}}) states per program what the
migration must report and how 2 processes end:
  "findings": rule ids fabricize must report (no other finding may appear),
  "errors": rule ids of error-level findings allowed (default none),
  "edits": rule ids the migration must have applied (an edit of each),
  "two_ranks": "in_sync" (default), "unused_parameters": some steps leave
      parameters without a gradient, so the 2-rank job must end within
      DIVERGE_LIMIT_S naming them and ddp_find_unused_parameters_true, and
      then train in sync with LT_STRATEGY set to it; or "diverge": the ranks may leave the
      training loop at different steps; the job must then end within
      DIVERGE_LIMIT_S seconds with the runtime's message naming the ranks
      (no abort text),
  "fails_under": {strategy: regex}: under --also-strategy that strategy
      must end the program with a message matching the regex: a limit of the
      strategy, which the entry's "why" explains (fsdp refuses a trained set
      that changes after setup: LoRA's phases),
  "args": program arguments, "loss_word": the word before the falling value,
  "compare": false to skip the metric comparison (with a "why"),
  "share": how each rank's work compares with one process's (issue 37,
      checked from the sync check's step counts and the runtime's
      duplicate-data warning): "half" (default: the data is split, so each
      rank makes about half the optimizer steps of one process, and the
      ranks never compute identical losses), "same_steps" (the program draws
      its batches per step, each rank its own: as many steps as one process,
      and no identical losses), "all" (the migration could not split the
      data and reported it: as many steps, and the runtime must say that the
      ranks computed the same losses).
Exit 77 (ctest's skip code) with a loud message when an input is missing.
"""
import argparse
import concurrent.futures
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

SKIP = 77
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
# A metric printed by 2 ranks vs by 1 process. The 2 ranks train the same
# model on the same data, but with half the steps per epoch (each rank's
# shard, the same per-rank batch) and another data order; the programs train
# to a noise floor, so accuracies land within ACC_ATOL of the 1-process
# value and losses within LOSS_RTOL (a loss on noisy labels moves with how
# confident the model got: up to ~30% measured). A metric that lost its
# meaning (a per-rank sum divided by the whole data set's size) is off by a
# factor of 2.
LOSS_RTOL = 0.35
LOSS_ATOL = 0.02
ACC_ATOL = 0.05
DIVERGE_LIMIT_S = 20
# A metric: a number right after a word naming a loss or an accuracy
# (`loss 0.12`, `val_acc: 0.9`, `test loss 0.3 acc 0.91`); other numbers a
# program prints (weights' statistics, sample means) are not compared.
METRIC = re.compile(r"\b([A-Za-z_]*(?:loss|acc)[A-Za-z_]*)\s*[:=]?\s*(" + NUMBER.pattern + ")", re.I)
SYNC_PASSED = re.compile(r"fabric: sync check passed: (\d+) steps, (\d+) parameter tensors identical on (\d+) ranks")
# The runtime's warning when every rank computed the same loss: the ranks
# train on the same batches (in sync, N times the work).
DUPLICATED = "fabric: every rank computed the same loss"


def fail(message):
    print(f"E2E FAILED: {message}", flush=True)
    sys.exit(1)


def run(cmd, **kwargs):
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, **kwargs)


def parse_programs(specs):
    programs = {}
    for spec in specs:
        name, _, source = spec.partition("=")
        programs[name] = os.path.abspath(source)
    return programs


def migrate(fabricize, name, source, work, check_pch=False):
    out = os.path.join(work, "migrated", name)
    shutil.rmtree(out, ignore_errors=True)
    result = run([fabricize, source, "-o", out, "--report", os.path.join(work, f"{name}.report.json")],
                 capture_output=True, text=True)
    sys.stdout.write(result.stdout + result.stderr)
    if result.returncode not in (0, 1):
        return f"{name}: fabricize exited {result.returncode}"
    migrated = os.path.join(out, os.path.basename(source))
    # Idempotence: migrating the migrated program changes nothing.
    again = run([fabricize, migrated, "--stdout", "--quiet"], capture_output=True, text=True)
    if again.returncode not in (0, 1):
        return f"{name}: fabricize on its own output exited {again.returncode}:\n{again.stderr}"
    with open(migrated) as f:
        text = f.read()
    if text != again.stdout:
        return f"{name}: migrating the migrated program changed it (not idempotent)"
    if check_pch:
        # The precompiled LibTorch header changes nothing but the speed.
        plain = run([fabricize, source, "--stdout", "--quiet", "--no-pch"], capture_output=True, text=True)
        if plain.returncode not in (0, 1) or plain.stdout != text:
            return f"{name}: the migration without the PCH differs from the one with it"
    return None


# -O0, not Release's -O3: the programs' work is calls into LibTorch, built
# once and optimised, so they train as fast (gan: 2.35 s at -O1, 2.32 s at
# -O0) and compile in a third less time than at -O1 (gan with clang's PCH:
# 9.1 s -> 6.0 s; -O1 had been 60% of -O3's 16.3 s). Original and migration
# alike. (fabricize verify, which users run, still builds at -O1.)
BUILD_FLAGS = ["-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DNDEBUG"]
# The originals and the migrations are compiled by clang++-19 (the tool's
# own toolchain, always installed) unless FABRIC_E2E_CXX names another: its
# precompiled header holds LibTorch's instantiated templates, so a program
# compiles in about half GCC's time (gan: 7.0 s -> 3.8 s; the PCH 27 -> 13 s).
# GCC still compiles migrated code in the demo, the verify tests and the
# LibTorch 2.x step, so both compilers see what the tool emits.
E2E_CXX = os.environ.get("FABRIC_E2E_CXX") or shutil.which("clang++-19")
if E2E_CXX:
    BUILD_FLAGS.append(f"-DCMAKE_CXX_COMPILER={E2E_CXX}")
    # Every build of the test tree takes its precompiled LibTorch from one
    # compile per kind (test/support/shared_pch.py; ctest sets the folder):
    # the originals, the migrations and verify's builds compile the same
    # header with the same flags ~40 times otherwise.
    if os.environ.get("FABRIC_SHARED_PCH_DIR"):
        BUILD_FLAGS.append("-DCMAKE_CXX_COMPILER_LAUNCHER=" + os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support", "shared-pch-launcher"))
        # A shared PCH costs a target nothing: every target of a project
        # compiles through one (FabricPrecompileAll.cmake), not only those
        # of 3 sources or more (data_repo's 2-source targets: ~50 s a
        # source under ctest without it).
        BUILD_FLAGS.append("-DFABRIC_PRECOMPILE_MIN_SOURCES=1")


def configure_and_build(source, build, work, fabric_dir, jobs):
    # Every target compiles through a precompiled LibTorch (the Fabric
    # package's helper): the test's build speed, not the project's.
    include = os.path.join(os.path.abspath(fabric_dir), "FabricPrecompileAll.cmake")
    configure = run(["cmake", "-S", source, "-B", build, "-G", "Ninja", *BUILD_FLAGS,
                     "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", f"-DCMAKE_PROJECT_INCLUDE={include}",
                     f"-DCMAKE_PREFIX_PATH={os.path.abspath(fabric_dir)}"], capture_output=True, text=True)
    if configure.returncode != 0:
        return f"configuring {source} failed:\n{configure.stdout}{configure.stderr}"
    built = run(["cmake", "--build", build, "-j", str(jobs)], capture_output=True, text=True)
    if built.returncode != 0:
        return f"building {source} failed:\n{built.stdout[-6000:]}{built.stderr[-3000:]}"
    return None


def executables(build):
    """The programs a CMake build made, wherever its subdirectories put them."""
    found = []
    for root, dirs, files in os.walk(build):
        dirs[:] = sorted(d for d in dirs if d != "CMakeFiles")
        for f in sorted(files):
            path = os.path.join(root, f)
            if os.access(path, os.X_OK) and not f.endswith((".so", ".sh", ".py")) and "." not in f:
                with open(path, "rb") as handle:
                    if handle.read(4) == b"\x7fELF":
                        found.append(path)
    return found


def repository_of(project_dir):
    """The repository holding a project folder: the nearest folder above it
    whose PROJECTS file lists it; None for a project of its own."""
    parent = os.path.dirname(project_dir)
    while parent != os.path.dirname(parent):
        listing = os.path.join(parent, "PROJECTS")
        if os.path.isfile(listing):
            with open(listing) as f:
                listed = {line.strip().rstrip("/") for line in f if line.strip() and not line.startswith("#")}
            if os.path.relpath(project_dir, parent) in listed:
                return parent
        parent = os.path.dirname(parent)
    return None


def prepare_project(args, name, source_dir):
    """Configures, migrates (whole, with -p --all), re-migrates, builds both."""
    base = os.path.join(args.work, "projects", name)
    shutil.rmtree(base, ignore_errors=True)
    original = os.path.join(base, "original")
    repository = repository_of(source_dir)
    shutil.copytree(repository or source_dir, original)
    for root, dirs, files in os.walk(original):
        for entry in dirs + files:
            path = os.path.join(root, entry)
            os.chmod(path, os.stat(path).st_mode | 0o200)
    if repository:
        # A clone: a git work tree, the project built in its own folder.
        init = run(["git", "init", "-q", original], capture_output=True, text=True)
        if init.returncode != 0:
            return None, f"{name}: git init failed:\n{init.stderr}"
        project = os.path.join(original, os.path.relpath(source_dir, repository))
        original_build = os.path.join(project, "build")
    else:
        project, original_build = original, os.path.join(base, "original-build")
    problem = configure_and_build(project, original_build, args.work, args.fabric_dir, args.jobs)
    if problem:
        return None, problem
    migrated = os.path.join(base, "migrated")
    report = os.path.join(args.work, f"{name}.report.json")
    # Exactly as the README says, from the project's folder: -p gives the
    # project root (from the CMake source directory), no --root.
    result = run([args.fabricize, "--all", "-p", os.path.relpath(original_build, project),
                  "-o", migrated, "--report", report], cwd=project, capture_output=True, text=True)
    sys.stdout.write(result.stdout + result.stderr)
    if result.returncode not in (0, 1):
        return None, f"{name}: fabricize --all exited {result.returncode}"
    # -o mirrors the root the tool chose: the project sits at its own place
    # under it (a repository's project folder, or the top for a project of
    # its own).
    root = project
    if os.path.exists(report):
        with open(report) as f:
            root = json.load(f).get("root") or project
    where = os.path.relpath(os.path.realpath(project), os.path.realpath(root))
    if where.startswith(".."):
        return None, f"{name}: fabricize chose the root {root}, which does not hold the project {project}"
    problem = configure_and_build(os.path.normpath(os.path.join(migrated, where)),
                                  os.path.join(base, "migrated-build"), args.work, args.fabric_dir, args.jobs)
    if problem:
        return None, problem
    # Idempotence: the migrated project, through its own compile commands.
    again = run([args.fabricize, "--all", "-p", os.path.join(base, "migrated-build"), "--diff", "--quiet"],
                capture_output=True, text=True)
    if again.returncode not in (0, 1) or again.stdout.strip():
        return None, (f"{name}: migrating the migrated project changed it (not idempotent), exit "
                      f"{again.returncode}:\n{again.stdout[:4000]}{again.stderr[-2000:]}")
    before = executables(original_build)
    after = executables(os.path.join(base, "migrated-build"))
    if len(before) != 1 or [os.path.relpath(b, original_build) for b in before] != \
            [os.path.relpath(a, os.path.join(base, "migrated-build")) for a in after]:
        return None, f"{name}: expected one program in each build, found {before} and {after}"
    return {"original": before[0], "fabric": after[0]}, None


def write_project(work, programs):
    lines = [
        "# Generated by test/e2e/run_e2e.py: the originals and their migrations,",
        "# built against the Fabric runtime as a user's project would be.",
        "cmake_minimum_required(VERSION 3.18)",
        "project(fabric_e2e CXX)",
        "set(CMAKE_CXX_STANDARD 17)",
        "find_package(Fabric CONFIG REQUIRED)",
    ]
    first = None
    for name, source in programs.items():
        base = os.path.basename(source)
        for target, path in ((f"{name}_original", source),
                             (f"{name}_fabric", os.path.join(work, "migrated", name, base))):
            lines.append(f'add_executable({target} "{path}")')
            lines.append(f"target_link_libraries({target} PRIVATE Fabric::fabric)")
            if first is None:
                first = target
                lines.append(f"target_precompile_headers({target} PRIVATE <torch/torch.h>)")
            else:
                lines.append(f"target_precompile_headers({target} REUSE_FROM {first})")
    with open(os.path.join(work, "CMakeLists.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def prepare(args):
    programs = parse_programs(args.program)
    if os.sep in args.fabricize:
        args.fabricize = os.path.abspath(args.fabricize)  # projects are migrated from their folder
    missing = [f"{n} ({s})" for n, s in programs.items() if not os.path.exists(s)]
    if missing:
        print("E2E SKIPPED: sources not found: " + ", ".join(missing), flush=True)
        sys.exit(SKIP)
    os.makedirs(args.work, exist_ok=True)
    binaries = {}
    projects = {n: s for n, s in programs.items() if os.path.isdir(s)}
    programs = {n: s for n, s in programs.items() if not os.path.isdir(s)}
    # Two projects at once: each one's build is mostly one precompiled header
    # and a few sources, which leaves a core idle.
    def one_project(item):
        name, source_dir = item
        started = time.time()
        paths, problem = prepare_project(args, name, source_dir)
        print(f"{name}: configured, migrated, built in {time.time() - started:.1f} s", flush=True)
        return name, paths, problem
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for name, paths, problem in pool.map(one_project, projects.items()):
            if problem:
                fail(problem)
            binaries[name] = paths
    if not programs:
        with open(os.path.join(args.work, "programs.json"), "w") as f:
            json.dump(binaries, f)
        return
    started = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        first = next(iter(programs))
        problems = [p for p in pool.map(
            lambda item: migrate(args.fabricize, item[0], item[1], args.work, check_pch=item[0] == first),
            programs.items()) if p]
    if problems:
        fail("\n".join(problems))
    print(f"migrated {len(programs)} programs in {time.time() - started:.1f} s", flush=True)
    write_project(args.work, programs)
    build = os.path.join(args.work, "build")
    cache = os.path.join(build, "CMakeCache.txt")
    if E2E_CXX and os.path.exists(cache) and f"CMAKE_CXX_COMPILER:FILEPATH={E2E_CXX}\n" not in open(cache).read():
        shutil.rmtree(build)  # CMake cannot switch a configured build's compiler
    configure = run(["cmake", "-S", args.work, "-B", build, "-G", "Ninja", *BUILD_FLAGS,
                     f"-DCMAKE_PREFIX_PATH={os.path.abspath(args.fabric_dir)}"])
    if configure.returncode != 0:
        fail("configuring the migrated programs failed")
    started = time.time()
    if run(["cmake", "--build", build, "-j", str(args.jobs)]).returncode != 0:
        fail("building the originals and the migrated programs failed")
    print(f"built in {time.time() - started:.1f} s", flush=True)
    for name in programs:
        binaries[name] = {"original": os.path.join(build, f"{name}_original"),
                          "fabric": os.path.join(build, f"{name}_fabric")}
    with open(os.path.join(args.work, "programs.json"), "w") as f:
        json.dump(binaries, f)


def execute(binary, cwd, env_extra, timeout, args=()):
    os.makedirs(cwd, exist_ok=True)
    env = dict(os.environ)
    env.update(env_extra)
    started = time.time()
    try:
        result = subprocess.run([binary, *args], cwd=cwd, env=env, capture_output=True, text=True,
                                timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f"{binary} {' '.join(args)} did not finish within {timeout} s (hang?)")
    elapsed = time.time() - started
    print(f"--- {os.path.basename(binary)} {env_extra} exit {result.returncode} in {elapsed:.1f} s", flush=True)
    sys.stdout.write(result.stdout)
    if result.stderr.strip():
        sys.stdout.write("[stderr]\n" + result.stderr)
    return result, elapsed


def shape_and_numbers(line):
    return NUMBER.sub("#", line), [float(x) for x in NUMBER.findall(line)]


def close(a, b, rtol=1e-4, atol=1e-6):
    return math.isclose(a, b, rel_tol=rtol, abs_tol=atol)


def losses(lines, word="loss"):
    values = []
    for line in lines:
        m = re.search(r"\b" + re.escape(word) + r"\s+(" + NUMBER.pattern + ")", line)
        if m:
            values.append(float(m.group(1)))
    return values


def sync_steps(stderr, name, label):
    """The steps the runtime's sync check compared, from its closing line."""
    found = SYNC_PASSED.findall(stderr)
    if "sync check FAILED" in stderr or "differ between ranks" in stderr:
        fail(f"{name}: {label}: the ranks' parameters differ (FABRIC_CHECK_SYNC):\n{stderr[-3000:]}")
    if len(found) != 1:
        fail(f"{name}: {label}: expected one 'fabric: sync check passed' line from rank 0, found {len(found)} "
             f"(was the model set up? did any fabric.step run?):\n{stderr[-2000:]}")
    return int(found[0][0]), int(found[0][2])


def check_findings(args, name, expect):
    """What fabricize reported for the program, against the manifest."""
    path = os.path.join(args.work, f"{name}.report.json")
    if not os.path.exists(path):
        return
    with open(path) as f:
        report = json.load(f)
    found = sorted({f["rule"] for f in report["findings"]})
    errors = sorted({f["rule"] for f in report["findings"] if f.get("severity") == "error"})
    wanted = sorted(set(expect.get("findings", [])))
    if found != wanted:
        details = "\n".join(f"  {f['path']}:{f['line']}: [{f['rule']}] {f['message'][:160]}"
                            for f in report["findings"])
        fail(f"{name}: fabricize reported {found or 'nothing'}, the manifest expects {wanted or 'nothing'}:\n{details}")
    unexpected = sorted(set(errors) - set(expect.get("errors", [])))
    if unexpected:
        fail(f"{name}: error-level findings {unexpected}: training code left without the Fabric")
    # Rules the migration must have applied (an edit of each).
    edited = {e["rule"] for f in report["files"] for e in f.get("edits", [])}
    missing = sorted(set(expect.get("edits", [])) - edited)
    if missing:
        fail(f"{name}: the migration made no edit of {missing}, which the manifest expects")


STEP_COUNTER = re.compile(r"\b(?:step|iter|iteration|batch)\s*[:=#]?\s*(\d+)\b", re.I)


def at_steps(lines, total_steps):
    """Each line with the optimizer step it speaks for, by shape.

    A line that names its step (`step 30 loss 0.8`) speaks for that step; the
    lines of a shape that do not (`epoch 2 loss 1.7`) split the run's steps
    evenly, each speaking for the middle of its share (an epoch's average
    loss is the loss around its middle)."""
    by_shape = {}
    for line in lines:
        by_shape.setdefault(shape_and_numbers(line)[0], []).append(line)
    timed = {}
    for shape, group in by_shape.items():
        points = []
        for i, line in enumerate(group):
            named = STEP_COUNTER.search(line)
            points.append((float(named.group(1)) if named else (i + 0.5) * total_steps / len(group), line))
        timed[shape] = points
    return timed


def interpolate(points, step, index, metric):
    """The value of the index-th metric of a shape's lines at a step, linearly
    between the lines around it (clamped at both ends)."""
    curve = sorted((t, float(metric.findall(line)[index][1])) for t, line in points
                   if len(metric.findall(line)) > index)
    if not curve:
        return None, None
    if step <= curve[0][0]:
        return curve[0][1], curve[0][0]
    for (t0, v0), (t1, v1) in zip(curve, curve[1:]):
        if step <= t1:
            return v0 + (v1 - v0) * (step - t0) / max(t1 - t0, 1e-12), step
    return curve[-1][1], curve[-1][0]


def compare_metrics(name, one_lines, one_steps, two_lines, two_steps, loss_word="loss"):
    """The last line of each shape on 2 ranks against the 1-process run after
    as many optimizer steps: the same metrics, within tolerance.

    2 ranks take half the steps per epoch (each rank's shard, the same
    per-rank batch, so twice the global batch): after epoch e they have made
    as many steps as 1 process after epoch e/2, and that is where their
    losses are comparable."""
    metric = METRIC if loss_word == "loss" else re.compile(
        r"\b([A-Za-z_]*(?:loss|acc|" + re.escape(loss_word) + r")[A-Za-z_]*)\s*[:=]?\s*(" + NUMBER.pattern + ")", re.I)
    one, two = at_steps(one_lines, one_steps), at_steps(two_lines, two_steps)
    worst, compared = 0.0, 0
    for shape, points in two.items():
        if shape not in one:
            continue
        step, line2 = points[-1]
        for index, (word, b) in enumerate(metric.findall(line2)):
            a, at = interpolate(one[shape], step, index, metric)
            if a is None:
                continue
            b = float(b)
            compared += 1
            accuracy = "acc" in word.lower()
            rtol, atol = (0.0, ACC_ATOL) if accuracy else (LOSS_RTOL, LOSS_ATOL)
            if not math.isclose(a, b, rel_tol=rtol, abs_tol=atol):
                fail(f"{name}: 2 ranks print {word} {b} after {step:.0f} optimizer steps where 1 process "
                     f"has {word} {a:.6g} after {at:.0f} (tolerance: accuracies {ACC_ATOL}, losses "
                     f"{LOSS_RTOL:.0%}): a metric that lost its meaning?\n  2 ranks:   {line2}\n"
                     f"  1 process: " + "\n             ".join(line for _, line in one[shape]))
            worst = max(worst, abs(a - b) / max(abs(a), 1e-12))
    if compared == 0:
        fail(f"{name}: no loss or accuracy printed by both runs to compare")
    return worst


def check_share(name, label, steps, one_steps, stderr, share):
    """Distributed, not only in sync: each rank's optimizer steps against one
    process's, and the runtime's word on identical losses."""
    duplicated = DUPLICATED in stderr
    if share == "all":
        if steps != one_steps or not duplicated:
            fail(f"{name}:{label} the manifest says the ranks train on all the data (reported by the migration): "
                 f"expected {one_steps} steps per rank and the runtime's '{DUPLICATED}' warning; got {steps} steps, "
                 f"warning {'present' if duplicated else 'absent'}")
        return
    if duplicated:
        fail(f"{name}:{label} every rank trained on the same batches (the runtime says so):\n"
             + "\n".join(line for line in stderr.splitlines() if DUPLICATED in line))
    if share == "same_steps":
        if steps != one_steps:
            fail(f"{name}:{label} each rank draws its own batches for as many steps as one process: expected "
                 f"{one_steps} steps per rank, got {steps}")
    elif share == "half":
        # Each rank's share of every epoch: about half the steps (the last
        # short batch may be padded on one rank, as DistributedSampler pads).
        if not 0.4 * one_steps <= steps <= 0.65 * one_steps:
            fail(f"{name}:{label} each rank made {steps} optimizer steps, one process {one_steps}: with the data "
                 f"split across 2 ranks each should make about half ({one_steps / 2:.0f})")
    else:
        fail(f"{name}: unknown share {share!r} in the manifest")
    print(f"{name}:{label} data share: {steps} steps per rank, {one_steps} on one process ({share})", flush=True)


def check_two_ranks(args, name, label, two, two_dir, expected, got, one_steps, saved, loss_word, expect):
    """The checks of a 2-rank run that trains in sync (`label` names its
    strategy when it is not the default): it finished, rank 0 alone printed,
    the loss fell, the metrics kept their meaning, the same files were
    written and rank 0 alone wrote the logs. Returns the loss curve and the
    largest metric difference from 1 process (None when not compared)."""
    if two.returncode != 0:
        fail(f"{name}: the migrated program on 2 processes{label} exited {two.returncode}")
    if args.sync_check:
        steps, ranks = sync_steps(two.stderr, name, "2 processes" + label)
        if steps == 0 or ranks != 2:
            fail(f"{name}:{label} the sync check compared {steps} steps on {ranks} ranks: nothing was trained in sync")
        check_share(name, label, steps, one_steps, two.stderr, expect.get("share", "half"))
    lines = two.stdout.strip().splitlines()
    if not lines:
        fail(f"{name}: 2 processes{label} printed nothing")
    duplicated = sorted({line for line in lines if lines.count(line) > 1})
    if duplicated:
        fail(f"{name}:{label} lines printed more than once (every rank printing?): {duplicated}")
    shapes = [shape_and_numbers(line)[0] for line in lines]
    unknown = [s for s in shapes if s not in {shape_and_numbers(e)[0] for e in expected}]
    if unknown:
        fail(f"{name}: 2 processes{label} printed lines the original never prints: {unknown}")
    curve = losses(lines, loss_word)
    if len(losses(expected, loss_word)) >= 2 and len(curve) < 2:
        fail(f"{name}: 2 processes{label} printed {len(curve)} loss values: too few to tell whether the loss "
             f"falls (give the program more epochs with --args)")
    if len(curve) >= 2 and not curve[-1] < curve[0]:
        fail(f"{name}: the loss did not fall on 2 processes{label}: {curve}")
    metric_diff = None
    if args.sync_check and expect.get("compare", True):
        metric_diff = compare_metrics(name + label, got, one_steps, lines, steps, loss_word)
    if sorted(os.listdir(two_dir)) != saved:
        fail(f"{name}: 2 processes{label} wrote {sorted(os.listdir(two_dir))}, expected {saved}")
    leftovers = [f for f in os.listdir(two_dir) if "tmp" in f]
    if leftovers:
        fail(f"{name}: temporary files left behind: {leftovers}")
    # Logs: rank 0 alone writes them, so one header and whole rows only, and
    # no more rows than the original (per-step logs: about half of them, as
    # each rank trains on half the data; per-epoch logs: as many).
    for log in [f for f in saved if f.endswith(".csv")]:
        with open(os.path.join(os.path.dirname(two_dir), "original", log)) as f:
            whole = f.read().splitlines()
        with open(os.path.join(two_dir, log)) as f:
            shared = f.read().splitlines()
        if not whole or not shared or shared[0] != whole[0] or shared.count(whole[0]) != 1:
            fail(f"{name}: {log} on 2 processes{label} does not start with the one header {whole[:1]}: {shared[:3]}")
        columns = whole[0].count(",")
        torn = [row for row in shared if row.count(",") != columns]
        if torn:
            fail(f"{name}: {log} on 2 processes{label} has rows from several writers: {torn[:3]}")
        rows, original_rows = len(shared) - 1, len(whole) - 1
        if not (original_rows + 1) // 2 - 3 <= rows <= original_rows:
            fail(f"{name}: {log} on 2 processes{label} has {rows} rows, the original {original_rows}: rank 0 alone "
                 f"writes between half of them and all")
    return curve, metric_diff


def run_program(args):
    with open(os.path.join(args.work, "programs.json")) as f:
        programs = json.load(f)
    name = args.program[0]
    binaries = programs[name]
    expect = {}
    if args.manifest:
        with open(args.manifest) as f:
            expect = json.load(f).get(name, {})
    check_findings(args, name, expect)
    runs = os.path.join(args.work, "runs", name)
    shutil.rmtree(runs, ignore_errors=True)
    cpu = {"LT_ACCELERATOR": "cpu"}
    if args.sync_check:
        cpu["FABRIC_CHECK_SYNC"] = "1"
    loss_word = expect.get("loss_word", args.loss_word)

    argv = expect.get("args", args.args)
    original, t_orig = execute(binaries["original"], os.path.join(runs, "original"), {},
                               args.timeout, argv)
    if original.returncode != 0:
        fail(f"{name}: the original program exited {original.returncode}")
    one, t_one = execute(binaries["fabric"], os.path.join(runs, "one"),
                         {**cpu, "LT_DEVICES": "1"}, args.timeout, argv)
    if one.returncode != 0:
        fail(f"{name}: the migrated program on 1 process exited {one.returncode}")
    one_steps = sync_steps(one.stderr, name, "1 process")[0] if args.sync_check else 0

    # 1 process trains exactly like the original.
    expected = original.stdout.strip().splitlines()
    got = one.stdout.strip().splitlines()
    if len(expected) != len(got) or not expected:
        fail(f"{name}: 1 process printed {len(got)} lines, the original {len(expected)}")
    worst = 0.0
    for e, g in zip(expected, got):
        (es, en), (gs, gn) = shape_and_numbers(e), shape_and_numbers(g)
        if es != gs or len(en) != len(gn):
            fail(f"{name}: 1-process line differs from the original:\n  original: {e}\n  migrated: {g}")
        for a, b in zip(en, gn):
            if not close(a, b):
                fail(f"{name}: 1-process number {b} differs from the original's {a}:\n  {e}\n  {g}")
            worst = max(worst, abs(a - b) / max(abs(a), 1e-12))
    saved = sorted(os.listdir(os.path.join(runs, "original")))
    if sorted(os.listdir(os.path.join(runs, "one"))) != saved:
        fail(f"{name}: files written differ: original {saved}, migrated "
             f"{sorted(os.listdir(os.path.join(runs, 'one')))}")

    # 2 processes: both finish (or, where the program leaves its loop on a
    # per-rank value, the job ends promptly and says why), rank 0 alone
    # prints, the loss falls, the metrics keep their meaning.
    two, t_two = execute(binaries["fabric"], os.path.join(runs, "two"),
                         {**cpu, "LT_DEVICES": "2"}, args.timeout, argv)
    if expect.get("two_ranks") == "diverge" and two.returncode != 0:
        if t_two > DIVERGE_LIMIT_S:
            fail(f"{name}: the diverging ranks took {t_two:.0f} s to end the job (limit {DIVERGE_LIMIT_S} s)")
        # The runtime's story (a rank finished early, or the ranks are in
        # different collectives), naming the ranks and their steps; not an
        # abort from Gloo's thread.
        story = re.search(r"^fabric: the ranks (left the training loop at different steps|took different "
                          r"paths through the program).*rank \d.*rank \d.*steps?\b.*all-reduce that value",
                          two.stderr, re.MULTILINE)
        if not story or "terminate called" in two.stderr or "killed by signal" in two.stderr:
            fail(f"{name}: the job ended (exit {two.returncode}) without naming the ranks and their steps:\n"
                 f"{two.stderr[-2000:]}")
        print(f"E2E OK {name}: original {t_orig:.1f} s, 1 process {t_one:.1f} s (max rel diff {worst:.2e}); "
              f"2 processes diverged as the manifest allows and the job ended in {t_two:.1f} s, saying so", flush=True)
        return
    if expect.get("two_ranks") == "unused_parameters":
        # Parameters some steps leave without a gradient: the job must end
        # promptly naming them and the strategy that trains them; with that
        # strategy chosen at run time (no source change) the ranks train in
        # sync.
        named = re.search(r"get no gradient in this backward.*: \S+.*ddp_find_unused_parameters_true",
                          two.stderr)
        if two.returncode == 0 or not named or t_two > DIVERGE_LIMIT_S:
            fail(f"{name}: 2 processes did not end within {DIVERGE_LIMIT_S} s naming the unused parameters and "
                 f"ddp_find_unused_parameters_true (exit {two.returncode}, {t_two:.1f} s):\n{two.stderr[-2000:]}")
        print(f"{name}: 2 processes ended in {t_two:.1f} s naming the unused parameters; again with "
              f"LT_STRATEGY=ddp_find_unused_parameters_true", flush=True)
        shutil.rmtree(os.path.join(runs, "two"), ignore_errors=True)
        two, t_two = execute(binaries["fabric"], os.path.join(runs, "two"),
                             {**cpu, "LT_DEVICES": "2", "LT_STRATEGY": "ddp_find_unused_parameters_true"},
                             args.timeout, argv)
    curve, metric_diff = check_two_ranks(args, name, "", two, os.path.join(runs, "two"), expected, got, one_steps,
                                         saved, loss_word, expect)
    # The same program under other strategies, switched the way a user
    # switches a migrated program (LT_STRATEGY, no source change): the same
    # checks. The manifest names the strategies that must end a program
    # (with the message it gives) instead: their limits, kept in view.
    also = []
    for strategy in args.also_strategy:
        refused = expect.get("fails_under", {}).get(strategy)
        run_dir = os.path.join(runs, "two-" + strategy)
        other, t_other = execute(binaries["fabric"], run_dir,
                                 {**cpu, "LT_DEVICES": "2", "LT_STRATEGY": strategy}, args.timeout, argv)
        if refused:
            if other.returncode == 0 or not re.search(refused, other.stderr):
                fail(f"{name}: under LT_STRATEGY={strategy} the manifest expects a failure matching {refused!r}; "
                     f"exit {other.returncode}:\n{other.stderr[-2000:]}")
            also.append(f"{strategy} ended it as the manifest expects")
            continue
        other_curve, other_diff = check_two_ranks(args, name, f" (LT_STRATEGY={strategy})", other, run_dir, expected,
                                                  got, one_steps, saved, loss_word, expect)
        within = f", metrics within {other_diff:.1%}" if other_diff is not None else ""
        also.append(f"{strategy} {t_other:.1f} s, losses {other_curve[:1]} -> {other_curve[-1:]}{within}")
    metrics = f", metrics within {metric_diff:.1%} of 1 process" if metric_diff is not None else ""
    also_text = "".join(f"; 2 processes under {line}" for line in also)
    print(f"E2E OK {name}: original {t_orig:.1f} s, 1 process {t_one:.1f} s (max rel diff {worst:.2e}), "
          f"2 processes {t_two:.1f} s, losses {curve[:1]} -> {curve[-1:]}{metrics}{also_text}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--fabricize", required=True)
    p.add_argument("--fabric-dir", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--program", action="append", required=True)
    p.add_argument("--jobs", type=int, default=2)
    r = sub.add_parser("run")
    r.add_argument("--work", required=True)
    r.add_argument("--program", action="append", required=True)
    r.add_argument("--timeout", type=int, default=600)
    r.add_argument("--args", nargs="*", default=[], help="arguments for every run of the program")
    r.add_argument("--loss-word", default="loss", help="the word before the value that must fall")
    r.add_argument("--manifest", help="JSON: what each program's migration reports and how 2 ranks end")
    r.add_argument("--also-strategy", action="append", default=[],
                   help="run the 2-rank job again with LT_STRATEGY set to this (in-sync programs), same checks")
    r.add_argument("--sync-check", action="store_true",
                   help="FABRIC_CHECK_SYNC=1: ranks in sync after every step; metrics as with 1 process")
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args)
    else:
        if not os.path.exists(os.path.join(args.work, "programs.json")):
            print("E2E SKIPPED: nothing prepared (the prepare step failed or was skipped)", flush=True)
            sys.exit(SKIP)
        run_program(args)


if __name__ == "__main__":
    main()
