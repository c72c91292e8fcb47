"""Fixes each input with clang-tidy and the fabric plugin and compares the
result with `fabricize --stdout` of the same input. Prints one line per input
and exits 1 when any differs (with the diff), 2 on a tool that fails."""
import argparse
import difflib
import os
import shlex
import shutil
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--clang-tidy", required=True)
    parser.add_argument("--plugin", required=True)
    parser.add_argument("--fabricize", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--flags", required=True)
    parser.add_argument("inputs", nargs="+")
    args = parser.parse_args()
    flags = shlex.split(args.flags)
    differ, changed = 0, 0
    for source in sorted(args.inputs):
        name = os.path.basename(source)
        migrate = subprocess.run([args.fabricize, "--stdout", "--quiet", source, "--"] + flags,
                                 capture_output=True, text=True)
        if migrate.returncode not in (0, 1) or not migrate.stdout:
            print("%s: fabricize failed (exit %d)\n%s" % (name, migrate.returncode, migrate.stderr))
            return 2
        fixed = os.path.join(args.work, name)
        shutil.copyfile(source, fixed)
        tidy = subprocess.run([args.clang_tidy, "--load=" + args.plugin, "--checks=-*,fabric-*", "--fix",
                               fixed, "--"] + flags, capture_output=True, text=True)
        if tidy.returncode != 0:
            print("%s: clang-tidy failed (exit %d)\n%s%s" % (name, tidy.returncode, tidy.stdout, tidy.stderr))
            return 2
        with open(source) as f:
            original = f.read()
        with open(fixed) as f:
            result = f.read()
        if migrate.stdout != original:
            changed += 1
        if result == migrate.stdout:
            print("%s: same" % name)
            continue
        differ += 1
        print("%s: DIFFERS from fabricize --stdout" % name)
        sys.stdout.writelines(difflib.unified_diff(migrate.stdout.splitlines(True), result.splitlines(True),
                                                   "fabricize", "clang-tidy --fix"))
    if differ:
        print("%d of %d inputs differ" % (differ, len(args.inputs)))
        return 1
    print("%d inputs changed by the migration, all fixed identically by clang-tidy" % changed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
