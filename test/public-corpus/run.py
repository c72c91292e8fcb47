#!/usr/bin/python3
"""Issue 39's public corpus: fabricize on training programs from public
repositories, as a new user would run it, one row per program.

  python3 test/public-corpus/run.py --checkouts DIR [--fabricize build/bin/fabricize]
      [--work DIR] [--only REGEX] [--steps 20] [--table docs/public-corpus-table.md]

DIR holds one checkout per repository, named owner+name (the repository's
files at the commit programs.json names; `--mirrors M` makes them there from
git directories M/owner+name/repo, as the project's `fetch` leaves them).
The code of those repositories never enters this project: programs.json
lists repository, commit, project folder, target and the data each reads.

For each program, in WORK/<id>/:
  1. its inputs are staged: small files of the format it reads (a recipe
     per format, below), in a folder each run links into its working folder
     (fabricize verify --inputs);
  2. its project is configured and built with CMake as its README says
     (against the LibTorch found by CMAKE_PREFIX_PATH, compile_commands.json
     on): a program that does not build here unmigrated is set aside;
  3. `fabricize verify -p build --target T` migrates it, builds the original
     and the migration, runs the original, the migration on 1 process and on
     2 (FABRIC_CHECK_SYNC=1), and checks: the same records on 1 process, the
     ranks in sync, each rank on its share of the data, no file written by
     both, the losses in band (docs/verify.md);
  4. one row: the verdict of each check, or why it could not build or run.

Exit status: 0 when every program ran (whatever its verdicts: the table is
the result), 2 when the runner itself could not work (no checkouts, no
fabricize).
"""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import io

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = ["one-rank-records", "two-ranks-run", "two-ranks-parameters", "two-ranks-data", "two-ranks-files",
          "two-ranks-loss"]


# ---- data recipes: small files of the format a program reads ---------------

def write_idx(path, magic, dims, payload):
    with open(path, "wb") as out:
        out.write(struct.pack(">i", magic))
        for dim in dims:
            out.write(struct.pack(">i", dim))
        out.write(payload)


def mnist_idx(folder):
    """LibTorch's torch::data::datasets::MNIST reads exactly 60000 training
    and 10000 test images (it checks the counts): the four idx files, with
    images whose mean brightness follows their label (learnable), so that
    losses fall as on MNIST."""
    import random
    os.makedirs(folder, exist_ok=True)
    generator = random.Random(39)
    for stem, count in (("train", 60000), ("t10k", 10000)):
        labels = bytes(generator.randrange(10) for _ in range(count))
        noise = bytes(generator.randrange(64) for _ in range(28 * 28))
        # One image per label (its brightness 16 x the label, over one noise).
        image_of = [bytes(min(255, 16 * label + n) for n in noise) for label in range(10)]
        images = b"".join(image_of[label] for label in labels)
        write_idx(os.path.join(folder, f"{stem}-images-idx3-ubyte"), 2051, (count, 28, 28), images)
        write_idx(os.path.join(folder, f"{stem}-labels-idx1-ubyte"), 2049, (count,), labels)


RECIPES = {"mnist-idx": mnist_idx}


# ---- the run --------------------------------------------------------------

def checkout_of(args, repo, commit, project):
    """The repository's checkout; made from its git directory (--mirrors)
    where missing, with the program's project folder only (a mirror may lack
    the repository's largest files: data it does not need)."""
    folder = os.path.join(args.checkouts, repo.replace("/", "+"))
    if os.path.isdir(os.path.join(folder, project)):
        return folder
    if not args.mirrors:
        return None
    git_dir = os.path.join(args.mirrors, repo.replace("/", "+"), "repo")
    if not os.path.isdir(git_dir):
        return None
    # Files whose content the mirror lacks (large images, data) are left out.
    listing = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", commit, "--", project],
                             capture_output=True, text=True).stdout.splitlines()
    blobs = {line.split()[2]: line.split("\t", 1)[1] for line in listing if line.split()[1] == "blob"}
    checked = subprocess.run(["git", "--git-dir", git_dir, "cat-file", "--batch-check"], input="\n".join(blobs) + "\n",
                             capture_output=True, text=True).stdout.splitlines()
    missing = [blobs[line.split()[0]] for line in checked if line.endswith(" missing")]
    exclude = [f":(exclude){path}" for path in missing]
    archive = subprocess.run(["git", "--git-dir", git_dir, "archive", commit, "--", project] + exclude,
                             capture_output=True)
    if archive.returncode != 0:
        sys.exit(f"public corpus: git archive {commit} -- {project} of {git_dir} failed: "
                 f"{archive.stderr.decode()[-500:]}")
    os.makedirs(folder, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(folder)
    return folder


def run_program(args, program):
    row = {"id": program["id"], "repo": program["repo"], "path": program["project"], "checks": {}, "cause": ""}
    source = checkout_of(args, program["repo"], program["commit"], program["project"])
    if source is None:
        row["cause"] = f"no checkout of {program['repo']} under {args.checkouts}"
        return row
    missing = [package for package in program.get("needs", [])
               if subprocess.run(["dpkg", "-s", package], capture_output=True).returncode != 0]
    if missing:
        row["cause"] = f"needs the Debian packages {' '.join(missing)} (apt-get install {' '.join(missing)})"
        return row
    work = os.path.join(args.work, program["id"].replace("/", "+"))
    shutil.rmtree(work, ignore_errors=True)
    inputs = os.path.join(work, "inputs")
    os.makedirs(inputs)
    for item in program["inputs"]:
        RECIPES[item["recipe"]](os.path.join(inputs, item["path"]))
    build = os.path.join(work, "build")
    configure = ["cmake", "-S", os.path.join(source, program["project"]), "-B", build, "-G", "Ninja",
                 "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", f"-DCMAKE_PREFIX_PATH={args.torch_prefix}",
                 "-DCMAKE_BUILD_TYPE=Release"] + program["cmake_args"]
    configured = subprocess.run(configure, capture_output=True, text=True)
    if configured.returncode != 0:
        row["cause"] = "its CMake project does not configure here: " + last_lines(configured.stderr, 3)
        return row
    # The original as its README builds it: a program that does not build
    # here unmigrated says nothing about fabricize.
    built = subprocess.run(["cmake", "--build", build, "--target", program["target"]], capture_output=True, text=True)
    if built.returncode != 0:
        errors = [line for line in built.stdout.splitlines() if "error" in line]
        row["cause"] = "the original does not build here: " + " / ".join(errors[:2])[-500:]
        row["verdict"] = "original does not build"
        return row
    report = os.path.join(work, "verify.json")
    command = [args.fabricize, "verify", "-p", build, "--target", program["target"], "--steps", str(args.steps),
               "--work", os.path.join(work, "verify"), "--report", report, "--timeout", str(args.timeout)]
    for flag in program["cmake_args"]:
        command.append("--cmake-arg=" + flag)
    if program["inputs"]:
        command += ["--inputs", inputs]
    if program["args"]:
        command += ["--args", program["args"]]
    verified = subprocess.run(command, capture_output=True, text=True)
    row["exit"] = verified.returncode
    if verified.returncode == 2 or not os.path.exists(report):
        row["cause"] = "fabricize verify could not build or run it: " + last_lines(verified.stdout + verified.stderr, 4)
        return row
    with open(report) as f:
        verdicts = json.load(f)
    for check in verdicts["checks"]:
        row["checks"][check["id"]] = check["verdict"]
        if check["verdict"] == "fail" and not row["cause"]:
            row["cause"] = f"{check['id']}: {check['details'][:300]}"
    row["findings"] = len(verdicts.get("migration_findings", []))
    # Differences the migration reported (its findings name what it could
    # not migrate) against differences nothing reported: the issue's "none
    # silent".
    row["verdict"] = verdicts["verdict"]
    if row["verdict"] != "equivalent":
        row["verdict"] = "reported" if row["findings"] > 0 else "SILENT"
    return row


def last_lines(text, count):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines[-count:])[-600:]


def table(rows):
    header = "| program | repository, path | " + " | ".join(CHECKS) + " | findings | verdict or cause |"
    lines = [header, "|" + "---|" * (len(CHECKS) + 4)]
    for row in rows:
        cells = [row["checks"].get(check, "-") for check in CHECKS]
        outcome = row.get("verdict", "not run")
        if row["cause"]:
            outcome += ": " + row["cause"].replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {row['id']} | {row['repo']} `{row['path']}` | " + " | ".join(cells) +
                     f" | {row.get('findings', '-')} | {outcome} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkouts", required=True)
    parser.add_argument("--mirrors", help="git directories to make missing checkouts from (owner+name/repo)")
    parser.add_argument("--fabricize", default=os.path.join(HERE, "../../build/bin/fabricize"))
    parser.add_argument("--work", default="/tmp/fabricize-public-corpus")
    parser.add_argument("--only", default="", help="a regex over the programs' ids")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--torch-prefix", default=None, help="CMAKE_PREFIX_PATH for find_package(Torch)")
    parser.add_argument("--table", help="also write the table (Markdown) here")
    args = parser.parse_args()
    if not os.access(args.fabricize, os.X_OK):
        sys.exit(f"public corpus: no fabricize at {args.fabricize} (build it, or pass --fabricize)")
    args.fabricize = os.path.abspath(args.fabricize)
    args.torch_prefix = args.torch_prefix or "/usr/lib/x86_64-linux-gnu/cmake/Torch"
    os.makedirs(args.checkouts, exist_ok=True)
    with open(os.path.join(HERE, "programs.json")) as f:
        programs = [p for p in json.load(f)["programs"] if re.search(args.only, p["id"])]
    if not programs:
        sys.exit(f"public corpus: no program's id matches '{args.only}'")
    rows = []
    for program in programs:
        print(f"public corpus: {program['id']} ...", flush=True)
        rows.append(run_program(args, program))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    text = table(rows)
    count = lambda verdict: sum(1 for row in rows if row.get("verdict") == verdict)
    summary = (f"{count('equivalent')} of {len(rows)} programs distributed correctly (every check passed); "
               f"{count('reported')} differ where the migration reported why; {count('SILENT')} differ with "
               f"nothing reported; {count('original does not build')} do not build here unmigrated; "
               f"{len(rows) - sum(count(v) for v in ('equivalent', 'reported', 'SILENT', 'original does not build'))} "
               f"fabricize could not migrate, build or run")
    print("\n" + text + "\n\n" + summary)
    if args.table:
        with open(args.table, "w") as f:
            f.write(text + "\n\n" + summary + "\n")


if __name__ == "__main__":
    main()
