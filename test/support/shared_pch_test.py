#!/usr/bin/env python3
"""test/support/shared_pch.py on a small header set (no LibTorch: seconds).

  shared_pch_test.py --clang CLANG++ --work DIR

A PCH compiled through the launcher is reused by a build with other include
directories and another header path (the same file, linked), and a source
compiles with it; a build whose own include directory holds a header of
the same name as one the PCH read gets its own PCH and says why; a changed
header makes the shared PCH compile again; without FABRIC_SHARED_PCH_DIR
the command runs as it is.
"""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCHER = os.path.join(HERE, "shared-pch-launcher")


def fail(message):
    print(f"FAILED: {message}")
    sys.exit(1)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def build_tree(work, name, extra_dirs=()):
    """A build folder as CMake lays out a PCH: cmake_pch.hxx and its .cxx."""
    tree = os.path.join(work, name)
    write(os.path.join(tree, "cmake_pch.hxx"), "#pragma clang system_header\n#include <lib.h>\n")
    write(os.path.join(tree, "cmake_pch.hxx.cxx"), "/* generated */\n")
    write(os.path.join(tree, "src", "use.cpp"), "int main() { return lib_value() - 42; }\n")
    return tree


def pch_command(clang, work, tree, extra_dirs=()):
    dirs = [a for d in extra_dirs for a in ("-I", d)]
    return [LAUNCHER, clang, "-O1", "-std=gnu++17", *dirs, "-isystem", os.path.join(work, "sys"),
            "-Xclang", "-emit-pch", "-Xclang", "-include", "-Xclang", os.path.join(tree, "cmake_pch.hxx"),
            "-x", "c++-header", "-MD", "-MT", "pch", "-MF", os.path.join(tree, "pch.d"),
            "-o", os.path.join(tree, "cmake_pch.hxx.pch"), "-c", os.path.join(tree, "cmake_pch.hxx.cxx")]


def run(command, env):
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"{' '.join(command)} exited {result.returncode}:\n{result.stdout}{result.stderr}")
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--clang", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    work = os.path.abspath(args.work)
    write(os.path.join(work, "sys", "lib.h"), "#pragma once\ninline int lib_value() { return 42; }\n")
    cache = os.path.join(work, "cache")
    env = {**os.environ, "FABRIC_SHARED_PCH_DIR": cache}

    first = build_tree(work, "first")
    run(pch_command(args.clang, work, first, [os.path.join(first, "src")]), env)
    shared = [f for f in os.listdir(cache) if f.endswith(".pch")]
    if len(shared) != 1:
        fail(f"expected one shared PCH in {cache}, found {shared}")
    shared = os.path.join(cache, shared[0])
    if not os.path.samefile(shared, os.path.join(first, "cmake_pch.hxx.pch")):
        fail("the first build's PCH is not the shared one")
    if "lib.h" not in open(os.path.join(first, "pch.d")).read():
        fail("the first build's dependency file does not name the header the PCH read")
    shutil.rmtree(first)  # the shared PCH names no file of a removed build

    second = build_tree(work, "second")
    result = run(pch_command(args.clang, work, second, [os.path.join(second, "src"), os.path.join(work, "more")]), env)
    if not os.path.samefile(shared, os.path.join(second, "cmake_pch.hxx.pch")):
        fail(f"a build with other include directories did not reuse the shared PCH:\n{result.stderr}")
    run([args.clang, "-O1", "-std=gnu++17", "-isystem", os.path.join(work, "sys"), "-Xclang", "-include-pch",
         "-Xclang", os.path.join(second, "cmake_pch.hxx.pch"), "-Xclang", "-include", "-Xclang",
         os.path.join(second, "cmake_pch.hxx"), "-c", os.path.join(second, "src", "use.cpp"),
         "-o", os.path.join(second, "use.o")], env)

    shadowing = build_tree(work, "shadowing")
    write(os.path.join(shadowing, "own", "lib.h"), "#pragma once\ninline int lib_value() { return 7; }\n")
    result = run(pch_command(args.clang, work, shadowing, [os.path.join(shadowing, "own")]), env)
    if os.path.samefile(shared, os.path.join(shadowing, "cmake_pch.hxx.pch")):
        fail("a build whose own lib.h shadows the PCH's got the shared PCH")
    if "would shadow" not in result.stderr:
        fail(f"the unshared compile did not say why:\n{result.stderr}")

    before = os.stat(shared).st_ino
    os.utime(os.path.join(work, "sys", "lib.h"))  # LibTorch upgraded
    changed = build_tree(work, "changed")
    run(pch_command(args.clang, work, changed), env)
    if os.stat(os.path.join(changed, "cmake_pch.hxx.pch")).st_ino == before or \
            not os.path.samefile(shared, os.path.join(changed, "cmake_pch.hxx.pch")):
        fail("a changed header did not compile the shared PCH again")

    plain = build_tree(work, "plain")
    run(pch_command(args.clang, work, plain), {k: v for k, v in os.environ.items() if k != "FABRIC_SHARED_PCH_DIR"})
    if any(os.path.samefile(os.path.join(cache, f), os.path.join(plain, "cmake_pch.hxx.pch"))
           for f in os.listdir(cache) if f.endswith(".pch")):
        fail("without FABRIC_SHARED_PCH_DIR the PCH still came from the cache")
    print("shared_pch: reused across builds, refused where a header is shadowed, renewed when one changed")


if __name__ == "__main__":
    main()
