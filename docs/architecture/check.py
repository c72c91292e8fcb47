#!/usr/bin/env python3
"""docs/architecture.md stays true (ctest docs.architecture):

  - every repository path it or the pictures' sources (docs/architecture/
    *.dot) name exists (`{a,b}` alternatives and `*` patterns expanded);
  - every runtime/src and tool source file appears in the page (a new
    component gets its box or row);
  - each checked-in SVG is what Graphviz's `dot -Tsvg` makes of its .dot
    (regenerate: `dot -Tsvg docs/architecture/X.dot -o docs/architecture/X.svg`).

  docs/architecture/check.py [--root CHECKOUT]
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys

PATH = re.compile(r"\b((?:runtime|tool|rewrite-rules|tidy|test|docs)/[\w./{},*<>-]+)")


def expand(path):
    m = re.search(r"\{([^}]*)\}", path)
    if not m:
        return [path]
    return [q for alt in m.group(1).split(",") for q in expand(path[:m.start()] + alt + path[m.end():])]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    root = os.path.abspath(parser.parse_args().root)
    problems = []
    page = open(os.path.join(root, "docs", "architecture.md")).read()
    dots = sorted(glob.glob(os.path.join(root, "docs", "architecture", "*.dot")))
    # A label's "\n" ends a line: the path after it starts a word.
    texts = [("docs/architecture.md", page)] + [(os.path.relpath(d, root), open(d).read().replace("\\n", "\n"))
                                                  for d in dots]
    named = 0
    for where, text in texts:
        for raw in PATH.findall(text):
            raw = raw.rstrip(".,)")
            if "<" in raw:  # a pattern for a new file (fabric-<id>.cpp)
                continue
            for path in expand(raw):
                named += 1
                if not glob.glob(os.path.join(root, path)):
                    problems.append(f"{where} names {path}, which does not exist")
    mentioned = page + "".join(t for _, t in texts[1:])
    # Named whole, or through `{a,b}` alternatives.
    mentioned_paths = {path for raw in PATH.findall(mentioned) for path in expand(raw.rstrip(".,)"))}
    for pattern in ("runtime/src/**/*.cpp", "tool/**/*.cpp", "rewrite-rules/rule-helpers/*.cpp"):
        for path in sorted(glob.glob(os.path.join(root, pattern), recursive=True)):
            rel = os.path.relpath(path, root)
            if rel not in mentioned_paths:
                problems.append(f"{rel} is in no box or row of docs/architecture.md")
    dot = shutil.which("dot")
    if not dot:
        problems.append("Graphviz's `dot` is not installed (scripts/setup.sh installs it): the pictures "
                        "cannot be checked")
    else:
        for source in dots:
            svg = source[:-4] + ".svg"
            made = subprocess.run([dot, "-Tsvg", source], capture_output=True, text=True, check=True).stdout
            if not os.path.exists(svg) or open(svg).read() != made:
                problems.append(f"{os.path.relpath(svg, root)} is stale: run dot -Tsvg {os.path.relpath(source, root)} "
                                f"-o {os.path.relpath(svg, root)}")
    if problems:
        print("docs/architecture.md is out of date:\n  " + "\n  ".join(problems))
        sys.exit(1)
    print(f"docs/architecture.md: {named} paths exist, every source file has its place, "
          f"{len(dots)} pictures up to date")


if __name__ == "__main__":
    main()
