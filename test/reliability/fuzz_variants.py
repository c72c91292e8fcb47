#!/usr/bin/env python3
"""Differential fuzzing of fabricize on variants of known programs.

Seeds: the rule tests' programs (test/rules/*.cpp), the reliability inputs
(test/reliability/hostile/Inputs/*.cpp) and, where present, the corpus
programs (../shared/corpus/*/train.cpp) -- each one that parses against the
LibTorch stub headers (test/stubs) on its own.

Each case applies 1-3 seeded mutations to one seed: rename the file's own
identifiers, add comments and blank lines, reorder adjacent independent
statements, move everything but main into a namespace, wrap main's body in a
lambda or in a function template, add macros (an unrelated one, and one that
wraps a statement). A variant that does not parse is discarded (counted).
For every variant that parses:
  - fabricize --stdout exits 0 or 1 (never 2, never a signal);
  - migrating the output again changes nothing (idempotent);
  - the output parses (clang++ -fsyntax-only -std=c++17 -isystem test/stubs);
  - for meaning-preserving mutations only (renames, comments, blank lines),
    the per-rule edit counts equal the seed's (differential check).

  fuzz_variants.py --fabricize BIN --clang CLANG++ --work DIR [--cases N] [--seed S] [--jobs J]

N and S default to $FABRIC_FUZZ_CASES (60) and $FABRIC_FUZZ_SEED (1): the
CI run is bounded and deterministic (60 cases: ~90 s of CI; 120 took 180 s
under ctest); more on demand, e.g.
  FABRIC_FUZZ_CASES=5000 FABRIC_FUZZ_SEED=7 ctest -R reliability.fuzz
A failing variant is kept under DIR/failures with the command to reproduce.
Exit status 0 when every variant passes.
"""
import argparse
import concurrent.futures
import glob
import os
import random
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TEST = os.path.dirname(HERE)
STUBS = os.path.join(TEST, "stubs")
FLAGS = ["-std=c++17", "-isystem", STUBS]

KEYWORDS = set("""alignas alignof and asm auto bool break case catch char class const constexpr
const_cast continue decltype default delete do double dynamic_cast else enum explicit export
extern false float for friend goto if inline int long mutable namespace new noexcept not nullptr
operator or private protected public register reinterpret_cast return short signed sizeof static
static_assert static_cast struct switch template this throw true try typedef typeid typename union
unsigned using virtual void volatile wchar_t while main argc argv std size_t int64_t int32_t
uint8_t define include ifdef ifndef endif pragma once""".split())


def run(command, **kwargs):
    return subprocess.run(command, capture_output=True, timeout=120, **kwargs)


def parses(clang, path):
    result = run([clang, "-fsyntax-only", "-w"] + FLAGS + [path])
    return result.returncode == 0, result.stderr.decode(errors="replace")


def stub_words():
    words = set()
    for path in glob.glob(os.path.join(STUBS, "**", "*.h"), recursive=True):
        words.update(re.findall(r"[A-Za-z_]\w*", open(path, errors="replace").read()))
    return words


def strip_comments_and_strings(text):
    """Same length, comments and literals blanked: for brace matching."""
    out = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text[i] in "\"'":
            quote, j = text[i], i + 1
            while j < n and text[j] != quote and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(n, j + 1)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def find_main(text):
    """(signature start, body open brace, body close brace, params) or None."""
    code = strip_comments_and_strings(text)
    match = re.search(r"^int\s+main\s*\(([^)]*)\)\s*\{", code, re.MULTILINE)
    if not match:
        return None
    open_brace = match.end() - 1
    depth = 0
    for i in range(open_brace, len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return match.start(), open_brace, i, match.group(1).strip()
    return None


# ---- mutations: each returns the new text, or None when it does not apply --

def m_rename(text, rng, context):
    code = strip_comments_and_strings(text)
    words = set(re.findall(r"\b[a-z_][a-z0-9_]*\b", code))
    candidates = sorted(w for w in words if w not in KEYWORDS and w not in context["stub_words"]
                        and len(w) > 1 and not w.startswith("fz_"))
    if not candidates:
        return None
    chosen = rng.sample(candidates, min(len(candidates), rng.randint(1, 4)))
    for word in chosen:
        text = re.sub(rf"\b{re.escape(word)}\b", f"fz_{word}_{rng.randint(0, 999)}", text)
    return text


def m_comments(text, rng, context):
    lines = text.split("\n")
    out = []
    for line in lines:
        if rng.random() < 0.15 and not line.rstrip().endswith("\\"):
            out.append(rng.choice(["", "// fz: a comment line", "  /* fz */", "\t"]))
        if line.strip().endswith(";") and rng.random() < 0.1 and "//" not in line:
            line = line + "  // fz trailing"
        out.append(line)
    return "\n".join(out)


def declared_name(statement):
    match = re.match(r"\s*(?:const\s+)?[\w:<>]+[\s*&]+(\w+)\s*(?:=|\(|\{|;)", statement)
    return match.group(1) if match else None


def m_reorder(text, rng, context):
    found = find_main(text)
    if not found:
        return None
    _, start, end, _ = found
    lines = text[start + 1:end].split("\n")
    spots = []
    for i in range(len(lines) - 1):
        a, b = lines[i], lines[i + 1]
        indent_a = len(a) - len(a.lstrip())
        indent_b = len(b) - len(b.lstrip())
        if not (a.strip().endswith(";") and b.strip().endswith(";")) or indent_a != indent_b:
            continue
        if any(s.lstrip().startswith(("return", "//", "}", "#", "case", "default")) for s in (a, b)):
            continue
        words_a = set(re.findall(r"\w+", a))
        words_b = set(re.findall(r"\w+", b))
        name_a, name_b = declared_name(a), declared_name(b)
        if (name_a and name_a in words_b) or (name_b and name_b in words_a):
            continue
        # Both touch the same object: the order may matter.
        shared = (words_a & words_b) - KEYWORDS - {"torch", "auto", "nn", "optim", "Tensor"}
        if shared:
            continue
        spots.append(i)
    if not spots:
        return None
    i = rng.choice(spots)
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    return text[:start + 1] + "\n".join(lines) + text[end:]


def m_namespace(text, rng, context):
    found = find_main(text)
    if not found:
        return None
    sig, _, _, _ = found
    code = strip_comments_and_strings(text)
    includes = [m.end() for m in re.finditer(r"^#include[^\n]*\n", code[:sig], re.MULTILINE)]
    begin = includes[-1] if includes else 0
    middle = text[begin:sig]
    if "#" in strip_comments_and_strings(middle) or not middle.strip():
        return None  # preprocessor lines between: leave them at file scope
    name = f"fz_ns{rng.randint(0, 99)}"
    return (text[:begin] + f"namespace {name} {{\n" + middle + f"}}  // namespace {name}\n"
            f"using namespace {name};\n" + text[sig:])


def m_lambda(text, rng, context):
    found = find_main(text)
    if not found:
        return None
    _, start, end, _ = found
    body = text[start + 1:end]
    return text[:start + 1] + "\n  return [&]() -> int {" + body + "\n  return 0;\n  }();\n" + text[end:]


def m_template(text, rng, context):
    found = find_main(text)
    if not found:
        return None
    sig, start, end, params = found
    body = text[start + 1:end]
    names = [p.split()[-1].lstrip("*&") for p in params.split(",") if p.strip() and p.strip() != "void"]
    extra = "".join(", " + p for p in params.split(",") if p.strip() and p.strip() != "void")
    function = (f"template <typename FzT>\nint fz_body(FzT{extra}) {{" + body + "\n  return 0;\n}\n\n")
    call = "fz_body(0" + "".join(", " + n for n in names) + ")"
    return text[:sig] + function + text[sig:start + 1] + f"\n  return {call};\n" + text[end:]


def m_macros(text, rng, context):
    found = find_main(text)
    if not found:
        return None
    sig, start, end, _ = found
    header = "#define FZ_UNUSED(x) (void)(x)\n#define FZ_STMT(...) __VA_ARGS__\n"
    lines = text[start + 1:end].split("\n")
    spots = [i for i, line in enumerate(lines)
             if line.strip().endswith(";") and not line.strip().startswith(("//", "return", "#"))
             and line.count("(") == line.count(")") and "//" not in line]
    if spots and rng.random() < 0.6:
        i = rng.choice(spots)
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        lines[i] = indent + "FZ_STMT(" + lines[i].strip()[:-1] + ");"
    lines.insert(1 if len(lines) > 1 else 0, "  FZ_UNUSED(0);")
    return text[:sig] + header + text[sig:start + 1] + "\n".join(lines) + text[end:]


MUTATIONS = {"rename": m_rename, "comments": m_comments, "reorder": m_reorder,
             "namespace": m_namespace, "lambda": m_lambda, "template": m_template,
             "macros": m_macros}
NEUTRAL = {"rename", "comments"}


def edit_counts(stderr):
    """{rule: count} from the tool's per-file summary line."""
    counts = {}
    for match in re.finditer(r"^fabricize: .*?: (\d+) edits(?: \((.*)\))?$", stderr, re.MULTILINE):
        for item in (match.group(2) or "").split(", "):
            if item:
                rule, count = item.rsplit(" ", 1)
                counts[rule] = counts.get(rule, 0) + int(count)
    return counts


def migrate(fabricize, path):
    result = run([fabricize, "--stdout", path, "--"] + FLAGS)
    return result.returncode, result.stdout, result.stderr.decode(errors="replace")


def check_case(args, index, seed_path, seed_counts, mutations, text):
    """Returns (status, detail): status is 'pass', 'invalid' or 'fail'."""
    work = os.path.join(args.work, "cases")
    stem = f"case{index:05d}"
    variant = os.path.join(work, stem + ".cpp")
    with open(variant, "w", encoding="utf-8", errors="surrogateescape") as file:
        file.write(text)
    ok, _ = parses(args.clang, variant)
    if not ok:
        os.remove(variant)
        return "invalid", ""
    problems = []
    code, output, stderr = migrate(args.fabricize, variant)
    if code not in (0, 1):
        problems.append(f"fabricize exited {code} on a variant that parses:\n{stderr[-2000:]}")
    else:
        migrated = os.path.join(work, stem + ".out.cpp")
        with open(migrated, "wb") as file:
            file.write(output)
        again_code, again, again_err = migrate(args.fabricize, migrated)
        if again_code not in (0, 1):
            problems.append(f"fabricize exited {again_code} on its own output:\n{again_err[-2000:]}")
        elif again != output:
            problems.append("not idempotent: migrating the output again changed it")
        ok, errors = parses(args.clang, migrated)
        if not ok:
            problems.append(f"the output does not parse:\n{errors[-2000:]}")
        if set(mutations) <= NEUTRAL and edit_counts(stderr) != seed_counts:
            problems.append(f"edits differ from the seed's: {edit_counts(stderr)} vs {seed_counts}")
        if not problems:
            os.remove(migrated)
    if not problems:
        os.remove(variant)
        return "pass", ""
    failures = os.path.join(args.work, "failures")
    os.makedirs(failures, exist_ok=True)
    kept = os.path.join(failures, stem + ".cpp")
    os.replace(variant, kept)
    detail = (f"{stem}: seed {os.path.relpath(seed_path, TEST)}, mutations {'+'.join(mutations)}\n  "
              + "\n  ".join(problems) + f"\n  reproduce: {args.fabricize} --stdout {kept} -- "
              + " ".join(FLAGS))
    return "fail", detail


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fabricize", required=True)
    parser.add_argument("--clang", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--cases", type=int, default=int(os.environ.get("FABRIC_FUZZ_CASES", 60)))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("FABRIC_FUZZ_SEED", 1)))
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("FABRIC_FUZZ_JOBS", 2)))
    args = parser.parse_args()
    for tool in (args.fabricize, args.clang):
        if not tool or not os.access(tool, os.X_OK):
            print(f"ERROR: {tool!r} is not an executable (need fabricize and clang++-19)")
            return 2
    os.makedirs(os.path.join(args.work, "cases"), exist_ok=True)
    for stale in glob.glob(os.path.join(args.work, "failures", "*")):
        os.remove(stale)
    started = time.monotonic()

    candidates = sorted(glob.glob(os.path.join(TEST, "rules", "*.cpp")) +
                        glob.glob(os.path.join(HERE, "hostile", "Inputs", "*.cpp")) +
                        glob.glob(os.path.join(TEST, "..", "..", "shared", "corpus", "*", "train.cpp")))
    seeds, rejected = [], []
    for path in candidates:
        ok, _ = parses(args.clang, path)
        if not ok:
            rejected.append(os.path.relpath(path, TEST))
            continue
        code, _, stderr = migrate(args.fabricize, path)
        if code not in (0, 1):
            print(f"FAIL seed {path}: fabricize exited {code}:\n{stderr}")
            return 1
        seeds.append((path, open(path, encoding="utf-8", errors="surrogateescape").read(),
                      edit_counts(stderr)))
    print(f"seeds: {len(seeds)} parse against the stubs alone; {len(rejected)} need other flags "
          f"and are not used: {', '.join(rejected)}")
    if not seeds:
        print("ERROR: no seed program parses: nothing was fuzzed")
        return 1

    rng = random.Random(args.seed)
    context = {"stub_words": stub_words()}
    planned = []
    for index in range(args.cases):
        path, text, counts = rng.choice(seeds)
        names = rng.sample(sorted(MUTATIONS), rng.randint(1, 3))
        applied = []
        for name in names:
            mutated = MUTATIONS[name](text, rng, context)
            if mutated is not None and mutated != text:
                text = mutated
                applied.append(name)
        if not applied:
            text = m_comments(text, rng, context)
            applied.append("comments")
        planned.append((index, path, counts, applied, text))

    tally = {"pass": 0, "invalid": 0, "fail": 0}
    per_mutation = {name: 0 for name in MUTATIONS}
    failures = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(check_case, args, index, path, counts, applied, text): applied
                   for index, path, counts, applied, text in planned}
        for future in concurrent.futures.as_completed(futures):
            status, detail = future.result()
            tally[status] += 1
            if status != "invalid":
                for name in futures[future]:
                    per_mutation[name] += 1
            if status == "fail":
                failures.append(detail)
    elapsed = time.monotonic() - started
    for detail in sorted(failures):
        print("FAIL " + detail)
    print(f"fuzz: seed {args.seed}, {args.cases} cases: {tally['pass']} passed, "
          f"{tally['fail']} failed, {tally['invalid']} variants did not parse (discarded); "
          f"{elapsed:.1f} s")
    print("checked variants per mutation: " +
          ", ".join(f"{name} {count}" for name, count in sorted(per_mutation.items())))
    checked = tally["pass"] + tally["fail"]
    if checked < max(1, args.cases // 2):
        print(f"ERROR: only {checked} of {args.cases} variants parsed: the mutations are broken")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
