#!/usr/bin/python3
"""How fast is fabricize on a many-TU LibTorch project, next to the parse
floor and clang-tidy?

Generates a project of N translation units (variants of the three
single-device LibTorch programs) with a compile_commands.json, then
measures, in one run and one process at a time:

  floor       clang++-19 -fsyntax-only on each TU (what any Clang tool pays
              to parse it without a PCH)
  tidy        clang-tidy-19 --checks='-*,modernize-use-nullptr' -p DIR on each TU
  fab-cold    fabricize on each TU with an empty --pch-cache (the first TU
              builds the LibTorch PCH)
  fab-warm    fabricize on each TU again, with that cache now populated
  fab-nopch   fabricize --no-pch on the first few TUs
  fab-all     one `fabricize --all -p DIR -j <CPUs> --diff` over the whole
              project (warm cache): the TUs in parallel in one process

CPU seconds (user + system) come from resource.getrusage(RUSAGE_CHILDREN)
deltas around each child; wall seconds and peak RSS (from os.wait4) are
printed too. CPU time is the steadier figure on a loaded machine.

Usage:
  /usr/bin/python3 bench/fabricize_speed.py            # 16 TUs
  /usr/bin/python3 bench/fabricize_speed.py --tus 8
  /usr/bin/python3 bench/fabricize_speed.py --quick    # 4 TUs
  /usr/bin/python3 bench/fabricize_speed.py --tus 16 --json out.json
  /usr/bin/python3 bench/fabricize_speed.py --report-from out.json   # the table again
"""

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = ROOT.parent / "shared"

PROGRAMS = [
    ("transformer_lm", SHARED / "corpus" / "transformer_lm" / "train.cpp"),
    ("mnist_cnn", SHARED / "corpus" / "mnist_cnn" / "train.cpp"),
    ("sine_regression", ROOT / "examples" / "sine_regression" / "train.cpp"),
]

TORCH_FLAGS = ["-std=c++17", "-isystem", "/usr/include/torch/csrc/api/include"]
TIDY_CHECKS = "-*,modernize-use-nullptr"


def make_variant(text: str, k: int) -> str:
    """Make TU k differ from its siblings: a distinct named constant after the
    last #include, and the first integer literal of main's body perturbed."""
    lines = text.splitlines(keepends=True)
    last_inc = max((i for i, l in enumerate(lines) if l.lstrip().startswith("#include")), default=-1)
    decl = (f"\n// fabricize_speed variant {k}\n"
            f"[[maybe_unused]] static constexpr int kBenchVariant{k} = {1000 + k};\n")
    lines.insert(last_inc + 1, decl)
    out = "".join(lines)
    # Perturb one constant inside main(): `= <int>;` -> `= <int> + 0*k;`
    # would be a no-op in meaning but different text; prefer a real change to
    # a seed/epoch count when present, otherwise add the no-op term.
    m = re.search(r"int main\s*\([^)]*\)\s*\{", out)
    if m:
        body = out[m.end():]
        lit = re.search(r"(?<![\w.])(\d+)(?![\w.])", body)
        if lit:
            start = m.end() + lit.start(1)
            end = m.end() + lit.end(1)
            out = out[:start] + f"({lit.group(1)} + 0 * kBenchVariant{k})" + out[end:]
    return out


def generate_project(d: Path, n: int) -> list:
    d.mkdir(parents=True, exist_ok=True)
    files = []
    entries = []
    for k in range(n):
        name, src = PROGRAMS[k % len(PROGRAMS)]
        f = d / f"tu{k:02d}_{name}.cpp"
        f.write_text(make_variant(src.read_text(), k))
        files.append(f)
        entries.append({
            "directory": str(d),
            "file": str(f),
            "arguments": ["clang++"] + TORCH_FLAGS + ["-c", str(f)],
        })
    (d / "compile_commands.json").write_text(json.dumps(entries, indent=1) + "\n")
    return files


def run_measured(cmd, cwd, log):
    """Run cmd to completion; return dict(cpu, wall, rss_mb, rc, err)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as errf:
        try:
            p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=errf)
        except OSError as e:  # e.g. the binary is being relinked
            log(f"    cannot run {cmd[0]}: {e}")
            return {"cpu": 0.0, "wall": 0.0, "rss_mb": 0.0, "rc": 126, "err": str(e)}
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        errf.seek(0)
        err = errf.read().decode(errors="replace")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    r = {"cpu": cpu, "wall": wall, "rss_mb": ru.ru_maxrss / 1024.0, "rc": p.returncode,
         "err": err[-2000:]}
    src = next((Path(c).name for c in cmd[1:] if str(c).endswith(".cpp")), "")
    log(f"    {Path(cmd[0]).name} {src}: rc={r['rc']} cpu={cpu:.2f}s wall={wall:.2f}s rss={r['rss_mb']:.0f}MB")
    return r


def loadavg():
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tus", type=int, default=16, help="number of translation units (default 16)")
    ap.add_argument("--quick", action="store_true", help="a short run: 4 TUs")
    ap.add_argument("--nopch-tus", type=int, default=3, help="TUs to run fabricize --no-pch on (default 3)")
    ap.add_argument("--fabricize", default=str(ROOT / "build" / "bin" / "fabricize"))
    ap.add_argument("--clang", default="/usr/bin/clang++-19")
    ap.add_argument("--clang-tidy", default="/usr/bin/clang-tidy-19")
    ap.add_argument("--workdir", help="where to generate the project (default: a fresh temp dir, removed after)")
    ap.add_argument("--keep", action="store_true", help="keep the generated project")
    ap.add_argument("--json", help="also write the raw measurements here")
    args = ap.parse_args()
    n = 4 if args.quick else args.tus
    if n < 1:
        ap.error("--tus must be >= 1")
    nopch_n = min(args.nopch_tus, n)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    for tool in (args.fabricize, args.clang, args.clang_tidy):
        if not os.access(tool, os.X_OK):
            sys.exit(f"fabricize_speed: not executable: {tool}")

    tmp = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="fabricize_speed."))
    proj = tmp / "project"
    cache = tmp / "pch-cache"
    if cache.exists():
        shutil.rmtree(cache)
    cache.mkdir(parents=True)
    files = generate_project(proj, n)

    load_start = loadavg()
    log(f"fabricize_speed: {n} TUs in {proj}, load average {load_start}, {os.cpu_count()} CPUs")
    res = {"floor": {}, "tidy": {}, "cold": {}, "warm": {}, "nopch": {}, "all": {}}

    def fab(f, extra):
        return [args.fabricize, str(f), "--stdout", "--quiet", "-p", str(proj)] + extra

    # Phase 1: fabricize with an empty cache (the first TU builds the PCH).
    log("phase 1: fabricize, cold PCH cache")
    for f in files:
        res["cold"][f.name] = run_measured(fab(f, ["--pch-cache", str(cache)]), proj, log)
    pchs = sorted(p.name for p in cache.glob("*.pch"))
    pch_mb = sum(p.stat().st_size for p in cache.glob("*.pch")) / 1e6

    # Phase 2: per TU, the floor, clang-tidy, fabricize (warm) and, for the
    # first few, fabricize --no-pch, back to back, so that load changes hit
    # every tool alike.
    log("phase 2: per TU: floor, [no-pch], clang-tidy, fabricize warm")
    for i, f in enumerate(files):
        log(f"  {f.name}")
        res["floor"][f.name] = run_measured(
            [args.clang, "-fsyntax-only"] + TORCH_FLAGS + [str(f)], proj, log)
        if i < nopch_n:
            res["nopch"][f.name] = run_measured(fab(f, ["--no-pch"]), proj, log)
        res["tidy"][f.name] = run_measured(
            [args.clang_tidy, f"--checks={TIDY_CHECKS}", "--quiet", "-p", str(proj), str(f)], proj, log)
        res["warm"][f.name] = run_measured(fab(f, ["--pch-cache", str(cache)]), proj, log)
        if args.json:  # partial results survive an interrupted run
            dump(args.json, n, load_start, loadavg(), pchs, pch_mb, res)
    # Phase 3: the whole project in one run, its TUs in parallel.
    log(f"phase 3: fabricize --all -j {os.cpu_count()}")
    res["all"]["project"] = run_measured(
        [args.fabricize, "--all", "-p", str(proj), "--diff", "--quiet", "-j", str(os.cpu_count()),
         "--pch-cache", str(cache)], proj, log)
    load_end = loadavg()
    if args.json:
        dump(args.json, n, load_start, load_end, pchs, pch_mb, res)
    failures = report([f.name for f in files], res, n, load_start, load_end, pchs, pch_mb)
    if args.keep or args.workdir:
        log(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


def dump(path, n, load_start, load_end, pchs, pch_mb, res):
    Path(path).write_text(json.dumps({
        "tus": n, "cpus": os.cpu_count(), "load_start": load_start, "load_end": load_end,
        "pch_files": pchs, "pch_mb": pch_mb, "results": res}, indent=1) + "\n")


def report(names, res, n, load_start, load_end, pchs, pch_mb):
    def ok(kind, name):
        r = res[kind].get(name)
        if r is None:
            return None
        good = r["rc"] in (0, 1) if kind in ("cold", "warm", "nopch", "all") else r["rc"] == 0
        return r if good else None

    failures = []
    for kind, d in res.items():
        for name, r in d.items():
            if ok(kind, name) is None:
                failures.append((kind, name, r))

    def cell(kind, name):
        r = res[kind].get(name)
        if r is None:
            return "-"
        s = f"{r['cpu']:.2f}"
        if ok(kind, name) is None:
            s += f" (rc {r['rc']})"
        return s

    shown = set(names)

    def rows(kind):
        return [r for k, r in res[kind].items() if k in shown]

    def total(kind, only=None):
        return sum(r["cpu"] for k, r in res[kind].items() if k in shown and (only is None or k in only))

    def wtotal(kind):
        return sum(r["wall"] for r in rows(kind))

    out = []
    out.append(f"fabricize_speed: {n} TUs, {os.cpu_count()} CPUs, load average {load_start} (start) / {load_end} (end)")
    out.append(f"PCH cache: {len(pchs)} file(s), {pch_mb:.0f} MB")
    out.append("")
    out.append("CPU seconds per TU (user+sys); fabricize exit 0/1 = migrated")
    out.append("")
    hdr = ["TU", "floor", "clang-tidy", "fab cold", "fab warm", "fab no-pch"]
    out.append("| " + " | ".join(hdr) + " |")
    out.append("|" + "|".join(["---"] + ["---:"] * (len(hdr) - 1)) + "|")
    for nm in names:
        out.append("| " + " | ".join([nm, cell("floor", nm), cell("tidy", nm), cell("cold", nm),
                                      cell("warm", nm), cell("nopch", nm)]) + " |")
    med = lambda kind: statistics.median([r["cpu"] for r in rows(kind)]) if rows(kind) else float("nan")
    out.append("| **median** | " + " | ".join(f"{med(k):.2f}" for k in ("floor", "tidy", "cold", "warm", "nopch")) + " |")
    out.append("| **total** | " + " | ".join(f"{total(k):.1f}" for k in ("floor", "tidy", "cold", "warm", "nopch")) + " |")
    out.append("| total wall | " + " | ".join(f"{wtotal(k):.1f}" for k in ("floor", "tidy", "cold", "warm", "nopch")) + " |")
    rss = lambda kind: max((r["rss_mb"] for r in rows(kind)), default=float("nan"))
    out.append("| peak RSS MB | " + " | ".join(f"{rss(k):.0f}" for k in ("floor", "tidy", "cold", "warm", "nopch")) + " |")
    out.append("")

    first = names[0]
    cold_first = res["cold"][first]["cpu"]
    cold_rest = [res["cold"][nm]["cpu"] for nm in names[1:] if nm in res["cold"]]
    ratios = []
    r1 = total("tidy") / total("warm") if total("warm") else float("nan")
    ratios.append(("clang-tidy / fabricize warm (per-TU CPU, totals)", r1, ">= 5", r1 >= 5))
    nopch_names = [k for k in res["nopch"] if k in shown]
    if nopch_names:
        r2 = total("nopch") / total("floor", nopch_names)
        ratios.append((f"fabricize --no-pch / floor (same {len(nopch_names)} TUs)", r2, "<= 1.1", r2 <= 1.1))
    r3 = total("tidy") / total("cold") if total("cold") else float("nan")
    ratios.append(("clang-tidy total / fabricize cold total (incl. PCH build)", r3, "> 1", r3 > 1))
    r4 = total("floor") / total("warm") if total("warm") else float("nan")
    ratios.append(("floor / fabricize warm", r4, "", None))
    whole = res.get("all", {}).get("project")
    if whole and ok("all", "project"):
        r5 = wtotal("tidy") / whole["wall"] if whole["wall"] else float("nan")
        ratios.append((f"clang-tidy wall (one TU at a time) / fabricize --all -j {os.cpu_count()} wall",
                       r5, "", None))
        r6 = wtotal("floor") / whole["wall"] if whole["wall"] else float("nan")
        ratios.append((f"floor wall (one TU at a time) / fabricize --all -j {os.cpu_count()} wall", r6, "", None))
    out.append("| ratio | value | goal | met |")
    out.append("|---|---:|---|---|")
    for name, v, goal, met in ratios:
        out.append(f"| {name} | {v:.2f}x | {goal} | {'' if met is None else ('yes' if met else 'NO')} |")
    out.append("")
    out.append(f"fabricize cold: first TU (builds the PCH) {cold_first:.2f} s CPU"
               + (f"; the other {len(cold_rest)} median {statistics.median(cold_rest):.2f} s" if cold_rest else ""))
    if whole:
        out.append(f"fabricize --all -j {os.cpu_count()} over all {n} TUs: {whole['wall']:.1f} s wall, "
                   f"{whole['cpu']:.1f} s CPU, peak RSS {whole['rss_mb']:.0f} MB")
    out.append(f"totals: clang-tidy {total('tidy'):.1f} s, fabricize cold {total('cold'):.1f} s, "
               f"fabricize warm {total('warm'):.1f} s, floor {total('floor'):.1f} s (CPU)")
    if failures:
        out.append("")
        out.append("FAILURES:")
        for kind, name, r in failures:
            out.append(f"  {kind} {name}: exit {r['rc']}")
            for l in r["err"].strip().splitlines()[-8:]:
                out.append(f"    {l}")
    print("\n".join(out))
    return failures


def rereport(path):
    """Print the table again from a --json file (also a partial one)."""
    d = json.loads(Path(path).read_text())
    res = d["results"]
    res.setdefault("all", {})
    names = list(res["cold"])
    done = [nm for nm in names if nm in res["warm"]]
    return report(done or names, res, d["tus"], d["load_start"], d["load_end"], d["pch_files"], d["pch_mb"])


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--report-from":
        sys.exit(1 if rereport(sys.argv[2]) else 0)
    sys.exit(main())
