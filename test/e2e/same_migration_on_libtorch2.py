#!/usr/bin/env python3
"""The rules see LibTorch 2.x as they see 1.13: every program of the shapes
corpus, the examples and ../shared/corpus (when present) is migrated twice,
parsed once against Debian's LibTorch 1.13 headers and once against a
LibTorch 2.x (the root scripts/libtorch2.sh prints), and the two migrations
must be byte-identical, with the same findings. A rule that matched a type
by a name or a header 2.x moved would migrate less, or differently, there.

Each program is a folder: its .cpp files are migrated together (-o, the
migrated tree), every folder in it is an include folder. The PCH for each LibTorch is built on first use.

usage: same_migration_on_libtorch2.py --fabricize build/bin/fabricize --libtorch2 ROOT
Exit 0: all identical; 1: a difference (printed as a diff); 2: a program
could not be migrated at all.
"""
import argparse
import difflib
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(os.path.dirname(ROOT), "shared", "corpus")
LIBTORCH_113 = ["-isystem", "/usr/include/torch/csrc/api/include"]


def programs():
    found = []
    for parent in (os.path.join(ROOT, "test", "shapes"), os.path.join(ROOT, "examples"), CORPUS):
        if not os.path.isdir(parent):
            if parent == CORPUS:
                print(f"note: {CORPUS} is missing: the shared corpus is not compared", flush=True)
            continue
        for name in sorted(os.listdir(parent)):
            folder = os.path.join(parent, name)
            if os.path.isdir(folder):
                found.append((f"{os.path.basename(parent)}/{name}", folder))
    return found


def migrate(fabricize, folder, flags, out, cache):
    sources, include_dirs = [], set()
    for here, _, files in os.walk(folder):
        include_dirs.add(here)  # "tinyreg/model.h" lives under lib/include/
        sources += [os.path.join(here, f) for f in sorted(files) if f.endswith(".cpp")]
    includes = [arg for d in sorted(include_dirs) for arg in ("-I", d)]
    report = out + ".json"
    done = subprocess.run([fabricize, *sources, "--quiet", "--root", folder, "-o", out, "--report", report,
                           "--pch-cache", cache, "--", "-std=c++17", *flags, *includes],
                          capture_output=True, text=True)
    if done.returncode not in (0, 1) or not os.path.exists(report):  # 1: migrated, with findings
        return None, f"exit {done.returncode}:\n{done.stderr[-3000:]}"
    with open(report) as f:
        findings = sorted((os.path.relpath(x["path"], folder), x["line"], x["rule"], x["message"])
                          for x in json.load(f).get("findings", []))
    tree = {}
    for here, _, files in os.walk(out):
        for f in files:
            path = os.path.join(here, f)
            with open(path, encoding="utf-8", errors="replace") as text:
                tree[os.path.relpath(path, out)] = text.read()
    return (tree, findings), None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fabricize", required=True)
    parser.add_argument("--libtorch2", required=True, help="the LibTorch 2.x root (scripts/libtorch2.sh)")
    args = parser.parse_args()
    flags = {"1.13": LIBTORCH_113,
             "2.x": ["-isystem", os.path.join(args.libtorch2, "include"),
                     "-isystem", os.path.join(args.libtorch2, "include", "torch", "csrc", "api", "include")]}
    differences, failures, compared = [], [], 0
    with tempfile.TemporaryDirectory() as work:
        cache = os.path.join(work, "pch")
        for label, folder in programs():
            results = {}
            for version, version_flags in flags.items():
                out = os.path.join(work, label.replace("/", "_") + "-" + version)
                results[version], problem = migrate(args.fabricize, folder, version_flags, out, cache)
                if problem:
                    failures.append(f"{label} against LibTorch {version}: {problem}")
            if any(r is None for r in results.values()):
                continue
            compared += 1
            (tree_a, findings_a), (tree_b, findings_b) = results["1.13"], results["2.x"]
            if findings_a != findings_b:
                differences.append(f"{label}: findings differ\n  1.13: {findings_a}\n  2.x:  {findings_b}")
            for path in sorted(set(tree_a) | set(tree_b)):
                a, b = tree_a.get(path), tree_b.get(path)
                if a != b:
                    diff = "".join(difflib.unified_diff((a or "").splitlines(True), (b or "").splitlines(True),
                                                        f"1.13/{path}", f"2.x/{path}"))
                    differences.append(f"{label}: {path} migrates differently\n{diff}")
        pchs = sorted(f for f in os.listdir(cache) if f.endswith(".pch")) if os.path.isdir(cache) else []
    for failure in failures:
        print(f"FAILED {failure}")
    for difference in differences:
        print(f"DIFFERENT {difference}")
    if len(pchs) != 2:
        print(f"FAILED expected one PCH per LibTorch, found {pchs}")
        failures.append("pch")
    if failures:
        sys.exit(2)
    if differences:
        sys.exit(1)
    print(f"{compared} programs migrate identically against LibTorch 1.13 and {args.libtorch2} "
          f"(same edits, same findings; {len(pchs)} PCHs)")


if __name__ == "__main__":
    main()
