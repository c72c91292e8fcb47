#!/usr/bin/env python3
"""The precision chosen at run time reaches a migrated program's forwards
(issue 27 point 1), with no source change.

  precision_probe.py BINARY

BINARY is test/e2e/precision_probe/train.cpp as fabricize migrated it
(e2e.examples.migrate_and_build builds it). It prints the dtype of its
training forward and of the forward in its evaluation helper. Under the
default precision (32-true) both are Float; with LT_PRECISION=bf16-mixed both
are BFloat16 on 1 and on 2 ranks, and the test loss stays within 10% of the
32-true one (the backward pass and the fp32 master weights still work).
"""
import os
import re
import subprocess
import sys


def fail(message):
    print(f"PRECISION PROBE FAILED: {message}", flush=True)
    sys.exit(1)


def run(binary, precision, devices):
    env = dict(os.environ, LT_ACCELERATOR="cpu", LT_DEVICES=str(devices))
    if precision:
        env["LT_PRECISION"] = precision
    result = subprocess.run([binary], capture_output=True, text=True, env=env, timeout=300)
    if result.returncode != 0:
        fail(f"{precision or '32-true'} on {devices} rank(s) exited {result.returncode}:\n{result.stdout}{result.stderr}")
    out = result.stdout
    train = set(re.findall(r"^train dtype (\w+)$", out, re.M))
    evaluation = set(re.findall(r"^eval dtype (\w+)$", out, re.M))
    loss = re.search(r"^test loss ([0-9.eE+-]+)$", out, re.M)
    if not train or not evaluation or not loss:
        fail(f"missing lines in the output of {precision or '32-true'} on {devices} rank(s):\n{out}")
    return train, evaluation, float(loss.group(1))


def main():
    binary = sys.argv[1]
    if not os.path.exists(binary):
        fail(f"{binary} does not exist (e2e.examples.migrate_and_build builds it)")
    train, evaluation, reference = run(binary, None, 1)
    if train != {"Float"} or evaluation != {"Float"}:
        fail(f"32-true: forwards in {train} and {evaluation}, expected Float")
    for devices in (1, 2):
        train, evaluation, loss = run(binary, "bf16-mixed", devices)
        if train != {"BFloat16"} or evaluation != {"BFloat16"}:
            fail(f"bf16-mixed on {devices} rank(s): training forward in {train}, evaluation forward in "
                 f"{evaluation}, expected BFloat16 (no autocast scope around the migrated forwards?)")
        if abs(loss - reference) > 0.1 * reference:
            fail(f"bf16-mixed on {devices} rank(s): test loss {loss}, 32-true {reference}")
        print(f"bf16-mixed on {devices} rank(s): both forwards in BFloat16, test loss {loss} (32-true: {reference})")
    print("PRECISION PROBE PASSED", flush=True)


if __name__ == "__main__":
    main()
