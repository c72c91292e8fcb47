#!/usr/bin/env python3
"""The packages (cmake/Packaging.cmake), installed and used as a user would.

  package_test.py --build BUILD --source CHECKOUT --work DIR

1. CPack makes the Debian package and the tarball from BUILD; both hold
   fabricize, fabric-run, the runtime's headers, library and CMake package,
   the clang-tidy plugin and verify's preload library, the same files; the
   Debian package depends on LibTorch's and Clang's packages and on the
   shared libraries its programs link.
2. The Debian package is installed into a throw-away root (dpkg-deb -x: no
   root rights, nothing on the system touched), and with that root alone
   (no build tree or checkout on any path) the bundled example is migrated
   by its fabricize, built with find_package(Fabric) from its CMake package,
   and trained on 2 processes, by its own launch and through its fabric-run,
   the ranks in sync; its clang-tidy plugin loads and lists the checks.
3. The tarball's fabricize runs from wherever it is unpacked.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile

REQUIRED = ["usr/bin/fabricize", "usr/bin/fabric-run", "usr/include/fabric/fabric.h",
            "usr/lib/cmake/Fabric/FabricConfig.cmake", "usr/lib/cmake/Fabric/FabricTargets.cmake",
            "usr/lib/libfabric_tidy.so", "usr/lib/libfabric_verify_files.so"]


def fail(message):
    print(f"PACKAGE FAILED: {message}", flush=True)
    sys.exit(1)


def run(command, **kwargs):
    print("+ " + " ".join(command), flush=True)
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    return subprocess.run(command, **kwargs)


def checked(command, what, **kwargs):
    result = run(command, **kwargs)
    if result.returncode != 0:
        fail(f"{what} exited {result.returncode}:\n{result.stdout[-4000:]}{result.stderr[-4000:]}")
    return result


def user_environment(build, source):
    """The environment of a user who has only the package: nothing of the
    build tree or the checkout on any search path."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("FABRICIZE_CACHE_DIR", "CMAKE_PREFIX_PATH", "LD_LIBRARY_PATH", "FABRIC_SHARED_PCH_DIR",
                        "CMAKE_CXX_COMPILER_LAUNCHER")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and not os.path.abspath(p).startswith((build, source)))
    return env


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--tidy-plugin", choices=("yes", "no"), default="yes",
                        help="whether the build made the clang-tidy plugin (the package must then hold it)")
    args = parser.parse_args()
    required = [f for f in REQUIRED if args.tidy_plugin == "yes" or "tidy" not in f]
    build, source, work = (os.path.realpath(p) for p in (args.build, args.source, args.work))
    for tool in ("cpack", "dpkg-deb", "dpkg-shlibdeps"):
        if not shutil.which(tool):
            fail(f"{tool} is missing (scripts/setup.sh installs cmake and dpkg-dev)")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    # 1. Both packages, and what they hold.
    checked(["cpack", "--config", os.path.join(build, "CPackConfig.cmake"), "-G", "DEB;TGZ", "-B",
             os.path.join(work, "packages")], "cpack", cwd=work)
    made = os.listdir(os.path.join(work, "packages"))
    debs = [f for f in made if f.endswith(".deb")]
    tars = [f for f in made if f.endswith(".tar.gz")]
    if len(debs) != 1 or len(tars) != 1:
        fail(f"expected one .deb and one .tar.gz, cpack made {made}")
    deb = os.path.join(work, "packages", debs[0])
    tar = os.path.join(work, "packages", tars[0])
    listing = checked(["dpkg-deb", "-c", deb], "dpkg-deb -c").stdout.splitlines()
    deb_files = sorted(line.split()[-1].lstrip("./") if "->" not in line else line.split(" -> ")[0].split()[-1].lstrip("./")
                       for line in listing if not line.startswith("d"))
    with tarfile.open(tar) as archive:
        tar_files = sorted(m.name.lstrip("./") for m in archive.getmembers() if not m.isdir())
    missing = [f for f in required if f not in deb_files]
    if missing or not any(f.startswith("usr/lib/libfabric.so") for f in deb_files):
        fail(f"the Debian package lacks {missing or 'usr/lib/libfabric.so'}; it holds {deb_files}")
    if deb_files != tar_files:
        fail(f"the tarball and the Debian package differ:\n  deb {deb_files}\n  tgz {tar_files}")
    depends = checked(["dpkg-deb", "-f", deb, "Depends"], "dpkg-deb -f").stdout
    for package in ("libtorch-dev", "libclang-common-19-dev", "libclang-cpp19", "libllvm19", "cmake"):
        if package not in depends:
            fail(f"the Debian package does not depend on {package}: Depends: {depends}")
    print(f"packages: {debs[0]} and {tars[0]}, {len(deb_files)} files each; Depends: {depends.strip()}")

    # 2. Installed into a throw-away root, used alone.
    root = os.path.join(work, "root")
    checked(["dpkg-deb", "-x", deb, root], "dpkg-deb -x")
    prefix = os.path.join(root, "usr")
    env = user_environment(build, source)
    fabricize = os.path.join(prefix, "bin", "fabricize")
    app = os.path.join(work, "app")
    example = os.path.join(work, "example", "train.cpp")
    os.makedirs(os.path.dirname(example))
    shutil.copyfile(os.path.join(source, "examples", "sine_regression", "train.cpp"), example)
    checked([fabricize, example, "-o", app, "--emit-cmake", "--accelerator", "cpu", "--devices", "2"],
            "the package's fabricize", env=env, cwd=os.path.dirname(example))
    migrated = open(os.path.join(app, "train.cpp")).read()
    if "#include <fabric/fabric.h>" not in migrated or "fabric.launch()" not in migrated:
        fail(f"the package's fabricize did not migrate the example:\n{migrated}")
    checked(["cmake", "-S", app, "-B", os.path.join(app, "build"), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
             f"-DCMAKE_PREFIX_PATH={prefix}"], "configuring against the package", env=env)
    checked(["cmake", "--build", os.path.join(app, "build")], "building against the package", env=env)
    with open(os.path.join(app, "build", "build.ninja")) as f:
        ninja = f.read()
    # (This test's own folder may sit inside the build tree: its paths are not a reach.)
    for tree in (build, os.path.join(source, "runtime")):
        reached = sorted({p for p in re.findall(re.escape(tree) + r"[^\s\"';:$]*", ninja) if not p.startswith(work)})
        if reached:
            fail(f"the build against the package reaches into {tree}: {reached[:5]}")
    if prefix not in ninja:
        fail("the build against the package does not use the package's runtime")
    program = os.path.join(app, "build", "train")
    linked = checked(["ldd", program], "ldd").stdout
    fabric_lib = [line for line in linked.splitlines() if "libfabric.so" in line]
    if not fabric_lib or prefix not in fabric_lib[0]:
        fail(f"the program does not load the package's libfabric.so:\n{linked}")
    run_env = {**env, "FABRIC_CHECK_SYNC": "1"}
    for how, command in (("its own launch", [program]),
                         ("fabric-run", [os.path.join(prefix, "bin", "fabric-run"), "--devices", "2",
                                         "--accelerator", "cpu", program])):
        trained = run(command, env=run_env, cwd=app, timeout=600)
        if trained.returncode != 0 or "on 2 ranks" not in trained.stderr or "loss" not in trained.stdout:
            fail(f"training with {how} against the package: exit {trained.returncode}\n"
                 f"{trained.stdout[-3000:]}{trained.stderr[-3000:]}")
        passed = [line for line in trained.stderr.splitlines() if "sync check passed" in line]
        print(f"trained with {how}: {passed[0] if passed else ''}")
    tidy = shutil.which("clang-tidy-19")
    if args.tidy_plugin == "no":
        print("the build made no clang-tidy plugin (FABRIC_BUILD_TIDY_PLUGIN=OFF): the package holds none")
    elif not tidy:
        fail("clang-tidy-19 is missing (scripts/setup.sh installs it): the package's plugin is untested")
    else:
        checks = checked([tidy, f"--load={os.path.join(prefix, 'lib', 'libfabric_tidy.so')}",
                          "--checks=-*,fabric-*", "--list-checks"], "clang-tidy with the package's plugin",
                         env=env).stdout
        if "fabric-backward" not in checks:
            fail(f"the package's clang-tidy plugin lists no fabric checks:\n{checks}")

    # 3. The tarball, unpacked anywhere.
    elsewhere = os.path.join(work, "tarball")
    with tarfile.open(tar) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(elsewhere, filter="data")
        else:
            archive.extractall(elsewhere)
    version = checked([os.path.join(elsewhere, "usr", "bin", "fabricize"), "--version"], "the tarball's fabricize",
                      env=env).stdout
    print(f"the tarball's fabricize: {version.strip()}")
    print("PACKAGE OK: the Debian package installs, migrates, builds and trains the example alone; "
          "the tarball holds the same files")


if __name__ == "__main__":
    main()
