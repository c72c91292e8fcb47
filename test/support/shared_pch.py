#!/usr/bin/env python3
"""One precompiled <torch/torch.h> for the tests' many builds of user projects.

The end-to-end and verify tests build ~40 CMake projects (each original and
its migration, several targets each), and each target's precompiled header
costs about one compile of <torch/torch.h> (~14 s): most of those builds'
time, for the same header compiled with the same flags. Given as the
compiler launcher of those builds (test/support/shared-pch-launcher), this
compiles each distinct PCH once per test tree and hands later builds a link
to it.

Only clang's PCH compiles come here (`-Xclang -emit-pch`, CMake's form);
the launcher runs every other command as it is. A PCH is reused when:
  - the compiler (path, size, mtime) and every argument are the same, except
    the output, the dependency-file arguments, the header CMake writes
    (cmake_pch.hxx: compared by content) and the include directories;
  - the include directories of the new build resolve every header the PCH
    read to the same file: no directory the new build searches first holds
    a file of the same relative name (a project's own `c10/` would shadow
    LibTorch's); otherwise the PCH is compiled as the build asked, unshared;
  - no header the PCH read changed since it was compiled (clang checks this
    too, loudly, when the PCH is used).
The PCH is compiled from a copy of the header kept beside it, so it never
names a file in a build tree that a test removes. Concurrent builds wait
for each other's compile of the same PCH (a lock per key).

  FABRIC_SHARED_PCH_DIR=DIR shared_pch.py COMPILER ARGS...

Without FABRIC_SHARED_PCH_DIR the command runs unchanged.
"""
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys


def run_unchanged(argv):
    os.execvp(argv[0], argv)


def parse(argv):
    """The parts of a PCH compile the cache needs, or None when it is not one."""
    args = argv[1:]
    found = {"out": None, "depfile": None, "dep_target": None, "header": None, "dirs": [], "key_args": []}
    i = 0
    while i < len(args):
        a = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else None
        if a == "-o" and nxt is not None:
            found["out"] = nxt
            i += 2
            continue
        if a in ("-MF", "-MT", "-MQ") and nxt is not None:
            if a == "-MF":
                found["depfile"] = nxt
            else:
                found["dep_target"] = nxt
            i += 2
            continue
        if a in ("-MD", "-MMD"):
            found["key_args"].append(a)
            i += 1
            continue
        if a in ("-I", "-isystem", "-iquote", "-idirafter") and nxt is not None:
            found["dirs"].append((a, os.path.normpath(os.path.abspath(nxt))))
            i += 2
            continue
        if a.startswith("-I") and len(a) > 2:
            found["dirs"].append(("-I", os.path.normpath(os.path.abspath(a[2:]))))
            i += 1
            continue
        if a.startswith("-isystem") and len(a) > len("-isystem"):
            found["dirs"].append(("-isystem", os.path.normpath(os.path.abspath(a[len("-isystem"):]))))
            i += 1
            continue
        # CMake's PCH header: -Xclang -include -Xclang <cmake_pch.hxx>
        if (a == "-Xclang" and nxt == "-include" and i + 3 < len(args) and args[i + 2] == "-Xclang"):
            found["header"] = args[i + 3]
            i += 4
            continue
        if a == "-c" and nxt is not None:
            found["input"] = nxt  # CMake's cmake_pch.hxx.cxx: an empty file
            i += 2
            continue
        found["key_args"].append(a)
        i += 1
    if not found["out"] or not found["header"] or not os.path.isfile(found["header"]) or \
            not os.path.isfile(found.get("input") or ""):
        return None
    return found


def compiler_identity(compiler):
    path = shutil.which(compiler) or compiler
    real = os.path.realpath(path)
    st = os.stat(real)
    return f"{real}:{st.st_size}:{int(st.st_mtime)}"


def search_order(dirs):
    """The directories searched for includes, in order (-iquote's for quoted
    ones only, first: counted as searched by every include, which can only
    refuse a PCH that could have been shared)."""
    first = [d for kind, d in dirs if kind == "-iquote"] + [d for kind, d in dirs if kind == "-I"]
    system = [d for kind, d in dirs if kind == "-isystem"]
    after = [d for kind, d in dirs if kind == "-idirafter"]
    return first + system + after


def read_depfile(path):
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    _, _, deps = text.partition(":")
    files, current = [], ""
    for part in deps.split(" "):
        if part.endswith("\\") and not part.endswith("\\\\"):
            current += part[:-1] + " "
            continue
        current += part
        if current.strip():
            files.append(current.strip())
        current = ""
    return files


def roots_of(deps, order):
    """Each header the PCH read, as (the directory it was found in, its name
    there); None for the directory when it came from the compiler's own."""
    result = []
    for dep in deps:
        dep = os.path.normpath(os.path.abspath(dep))
        best = None
        for d in order:
            if dep.startswith(d + os.sep) and (best is None or len(d) > len(best)):
                best = d
        result.append((best, os.path.relpath(dep, best) if best else dep))
    return result


def compiler_dirs(compiler):
    """The compiler's own include directories, searched after the build's."""
    result = subprocess.run([compiler, "-x", "c++", "-E", "-v", "-"], stdin=subprocess.DEVNULL,
                            capture_output=True, text=True)
    dirs, inside = [], False
    for line in result.stderr.splitlines():
        if line.startswith("#include <...> search starts here"):
            inside = True
        elif line.startswith("End of search list"):
            inside = False
        elif inside:
            dirs.append(os.path.normpath(line.strip()))
    return dirs


STALE = "stale"


def reusable(meta, order, log):
    """Whether the new build's include directories find each header the PCH
    read at the same place. The compiler's own directories are the same (the
    key holds the compiler) and come last; the directories both builds name
    keep their order; a directory only the new build names must not hold a
    file of the same name as a header the PCH read from a later one."""
    original = meta["dirs"]
    if [d for d in order if d in original] != [d for d in original if d in order]:
        log("this build names the shared PCH's include directories in another order")
        return False
    full = order + [d for d in meta["compiler_dirs"] if d not in order]
    read = {os.path.join(r, n) if r else n for r, n in meta["headers"]}
    for root, name in meta["headers"]:
        path = os.path.join(root, name) if root else name
        try:
            if os.stat(path).st_mtime > meta["mtime"]:
                return STALE  # a header changed (LibTorch upgraded): compiled again
        except FileNotFoundError:
            return STALE
        if root is None:  # a file outside every searched folder (the header itself)
            continue
        if root not in full:
            log(f"this build does not search {root}, where the shared PCH found {name}")
            return False
        for d in full[:full.index(root)]:
            candidate = os.path.join(d, name)
            if d not in original and d not in meta["compiler_dirs"] and candidate not in read \
                    and os.path.exists(candidate):
                log(f"{candidate} would shadow {path}")
                return False
    return True


def link_or_copy(src, dst):
    tmp = f"{dst}.tmp{os.getpid()}"
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def write_depfile(found, headers):
    if not found["depfile"]:
        return
    target = found["dep_target"] or found["out"]
    names = [os.path.join(r, n) if r else n for r, n in headers]
    with open(found["depfile"], "w") as f:
        f.write(target.replace(" ", "\\ ") + ": " + " \\\n  ".join(p.replace(" ", "\\ ") for p in names) + "\n")


def main(argv):
    cache = os.environ.get("FABRIC_SHARED_PCH_DIR")
    found = parse(argv) if cache and len(argv) > 1 else None
    if found is None:
        run_unchanged(argv)
    os.makedirs(cache, exist_ok=True)
    with open(found["header"], "rb") as f:
        header_text = f.read()
    key_material = json.dumps([compiler_identity(argv[0]), found["key_args"],
                               hashlib.sha256(header_text).hexdigest()])
    key = hashlib.sha256(key_material.encode()).hexdigest()[:20]
    base = os.path.join(cache, key)
    order = search_order(found["dirs"])
    quiet = os.environ.get("FABRIC_SHARED_PCH_QUIET") == "1"

    def log(message):
        if not quiet:
            print(f"shared_pch: not shared ({message}): compiling {found['out']} as asked", file=sys.stderr)

    shared = True
    with open(base + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        meta = None
        if os.path.exists(base + ".json") and os.path.exists(base + ".pch"):
            with open(base + ".json") as f:
                meta = json.load(f)
            verdict = reusable(meta, order, log)
            if verdict is STALE:
                meta = None
            elif not verdict:
                shared = False
        if meta is None:
            # First of its kind: compiled from a copy of the header beside it.
            if not os.path.exists(base + ".hxx") or open(base + ".hxx", "rb").read() != header_text:
                with open(base + ".hxx", "wb") as f:
                    f.write(header_text)
            shutil.copyfile(found["input"], base + ".cxx")
            args = list(argv)
            args[args.index(found["header"])] = base + ".hxx"
            args[len(args) - 1 - args[::-1].index(found["input"])] = base + ".cxx"
            args[args.index("-o") + 1] = base + ".pch.tmp"
            dep = base + ".d"
            if "-MF" in args:
                args[args.index("-MF") + 1] = dep
            else:
                args[1:1] = ["-MD", "-MF", dep]
            result = subprocess.run(args)
            if result.returncode != 0:
                return result.returncode
            os.replace(base + ".pch.tmp", base + ".pch")
            own = compiler_dirs(argv[0])
            headers = roots_of(read_depfile(dep), order + [d for d in own if d not in order])
            meta = {"mtime": os.stat(base + ".pch").st_mtime, "headers": headers, "compiler_dirs": own, "dirs": order,
                    "command": argv}
            with open(base + ".json.tmp", "w") as f:
                json.dump(meta, f)
            os.replace(base + ".json.tmp", base + ".json")
    if not shared:
        run_unchanged(argv)
    link_or_copy(base + ".pch", found["out"])
    write_depfile(found, meta["headers"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
