#!/usr/bin/env python3
"""What two builds of fabricize do to the shapes corpus, side by side.

  before_after.py --before OLD/bin/fabricize --before-runtime OLD_SRC/runtime/include \\
                  --after build/bin/fabricize --after-runtime runtime/include [--shape NAME ...]

For each shape (test/shapes/*), each fabricize migrates it as the README
says (a single file: `fabricize train.cpp -o OUT`; a CMake project:
`fabricize --all -p BUILD -o OUT` after configuring it), then this prints:
its exit code, the findings by rule id (error-level ones marked `!`), what
training code it left unmigrated in the output (`x.backward()`,
`optimizer.step()`, `.cuda()`, `make_data_loader`, `torch::save`/`load`,
`std::cout`/`printf` in training code outside the Fabric), whether the
output compiles against that build's runtime headers (g++ -fsyntax-only,
single files only), and for CMake projects whether the output tree has
its CMakeLists.txt (so `cmake -S OUT` can build). With `--run FABRIC_BUILD`
each single-file output that builds is also compiled against the runtime
of FABRIC_BUILD (its lib/ and the sources' runtime/include, the current
one: it has FABRIC_CHECK_SYNC) and run on 2 CPU ranks with the sync check,
next to the original: whether the ranks stay in sync, and the last line
printed by each. It is a report for a person, not a test: CI runs the
shapes through test/e2e/run_e2e.py.
"""
import concurrent.futures
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_INCLUDES = ["-isystem", "/usr/include/torch/csrc/api/include"]
LEFTOVERS = {
    "backward": re.compile(r"(?<!fabric)(?<!fabric_)\.backward\("),
    "step": re.compile(r"\b(?:optimizer\w*|opt\w*)(?:\.|->)step\("),
    "cuda": re.compile(r"\.cuda\(\)"),
    "loader": re.compile(r"make_data_loader"),
    "save/load": re.compile(r"torch::(?:save|load)\("),
}


def run(cmd, cwd=None):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)


def migrate(fabricize, shape_dir, work):
    """Returns (exit code, report, output dir, project?)."""
    out = os.path.join(work, "out")
    report = os.path.join(work, "report.json")
    if os.path.exists(os.path.join(shape_dir, "CMakeLists.txt")):
        build = os.path.join(work, "build")
        configured = run(["cmake", "-S", shape_dir, "-B", build, "-G", "Ninja",
                          "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"])
        if configured.returncode != 0:
            return None, None, out, True
        result = run([fabricize, "--all", "-p", build, "-o", out, "--report", report, "--quiet"])
        project = True
    else:
        result = run([fabricize, os.path.join(shape_dir, "train.cpp"), "-o", out, "--report", report, "--quiet"])
        project = False
    data = None
    if os.path.exists(report):
        with open(report) as f:
            data = json.load(f)
    return result.returncode, data, out, project


def leftovers(out):
    found = {}
    for path in glob.glob(os.path.join(out, "**", "*.cpp"), recursive=True) + \
            glob.glob(os.path.join(out, "**", "*.h"), recursive=True):
        with open(path) as f:
            text = f.read()
        for name, pattern in LEFTOVERS.items():
            count = len(pattern.findall(text))
            if count:
                found[name] = found.get(name, 0) + count
    return found


def compiles(out, runtime_include):
    source = os.path.join(out, "train.cpp")
    if not os.path.exists(source):
        return None
    result = run(["g++", "-std=c++17", "-fsyntax-only", "-DUSE_DISTRIBUTED", "-DUSE_C10D_GLOO",
                  "-isystem", runtime_include, *TORCH_INCLUDES, source])
    if result.returncode == 0:
        return "builds"
    first = next((line for line in result.stderr.splitlines() if "error:" in line), "error")
    return "does not build: " + first.split("error:", 1)[-1].strip()[:90]


def train(out, shape_dir, fabric_build, runtime_include, work):
    """Compiles the output against the current runtime and runs it on 2 ranks next to the original."""
    flags = ["-std=c++17", "-O1", "-DUSE_DISTRIBUTED", "-DUSE_C10D_GLOO", "-isystem", runtime_include, *TORCH_INCLUDES]
    libs = ["-L" + os.path.join(fabric_build, "lib"), "-Wl,-rpath," + os.path.join(fabric_build, "lib"), "-lfabric",
            "-ltorch", "-ltorch_cpu", "-lc10"]
    migrated, original = os.path.join(work, "migrated.bin"), os.path.join(work, "original.bin")
    if run(["g++", *flags, os.path.join(out, "train.cpp"), "-o", migrated, *libs]).returncode != 0:
        return "does not link against the current runtime"
    if run(["g++", *flags, os.path.join(shape_dir, "train.cpp"), "-o", original, *libs]).returncode != 0:
        return "the original does not build"
    runs = {}
    for label, binary, env in (("original", original, {}),
                               ("2 ranks", migrated, {"LT_ACCELERATOR": "cpu", "LT_DEVICES": "2", "FABRIC_CHECK_SYNC": "1"})):
        cwd = os.path.join(work, "run-" + label.replace(" ", "-"))
        os.makedirs(cwd, exist_ok=True)
        try:
            runs[label] = subprocess.run([binary], cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True,
                                         timeout=120)
        except subprocess.TimeoutExpired:
            return "2 ranks: hung (120 s)"
    two = runs["2 ranks"]
    last = lambda r: (r.stdout.strip().splitlines() or [""])[-1]
    passed = re.search(r"sync check passed: (\d+) steps", two.stderr)
    if passed and int(passed.group(1)) > 0:
        sync = f"ranks in sync ({passed.group(1)} steps compared)"
    elif passed:
        sync = "no step went through the Fabric: nothing kept the ranks in sync"
    elif "differ" in two.stderr or "sync check" in two.stderr:
        sync = "ranks NOT in sync"
    else:
        sync = f"exit {two.returncode}"
    lines = two.stdout.strip().splitlines()
    twice = len(lines) - len(set(lines))
    return (f"2 ranks: {sync}" + (f", {twice} lines printed twice" if twice else "") +
            f"; original's last line `{last(runs['original'])}`, 2 ranks' `{last(two)}`")


def describe(code, report, out, project, runtime_include):
    if report is None:
        return f"exit {code}, no report"
    rules = {}
    for finding in report["findings"]:
        key = finding["rule"] + ("!" if finding.get("severity") == "error" else "")
        rules[key] = rules.get(key, 0) + 1
    edits = sum(len(f["edits"]) for f in report["files"])
    parts = [f"exit {code}", f"{edits} edits"]
    parts.append("findings " + (", ".join(f"{k} x{v}" for k, v in sorted(rules.items())) or "none"))
    left = leftovers(out)
    parts.append("left " + (", ".join(f"{k} x{v}" for k, v in sorted(left.items())) or "nothing"))
    if project:
        parts.append("CMakeLists.txt mirrored" if os.path.exists(os.path.join(out, "CMakeLists.txt"))
                     else "no CMakeLists.txt in the output")
    else:
        parts.append(compiles(out, runtime_include))
    return "; ".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True)
    parser.add_argument("--before-runtime", required=True)
    parser.add_argument("--after", required=True)
    parser.add_argument("--after-runtime", required=True)
    parser.add_argument("--shape", action="append")
    parser.add_argument("--run", metavar="FABRIC_BUILD",
                        help="also train single-file outputs on 2 ranks against this build's runtime")
    args = parser.parse_args()
    shapes = args.shape or sorted(os.path.basename(d) for d in glob.glob(os.path.join(HERE, "*"))
                                  if os.path.isdir(d))
    def report(shape):
        shape_dir = os.path.join(HERE, shape)
        lines = [f"## {shape}"]
        for label, fabricize, runtime in (("before", args.before, args.before_runtime),
                                          ("after", args.after, args.after_runtime)):
            work = tempfile.mkdtemp(prefix=f"shape-{label}-")
            try:
                code, report, out, project = migrate(os.path.abspath(fabricize), shape_dir, work)
                text = describe(code, report, out, project, os.path.abspath(runtime))
                if args.run and not project and text.endswith("builds"):
                    text += "; " + train(out, shape_dir, os.path.abspath(args.run),
                                         os.path.abspath(args.after_runtime), work)
                lines.append(f"- {label}: {text}")
            finally:
                shutil.rmtree(work, ignore_errors=True)
        return "\n".join(lines)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for text in pool.map(report, shapes):
            print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
