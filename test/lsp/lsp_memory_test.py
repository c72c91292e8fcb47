#!/usr/bin/env python3
"""The language server's memory stays flat over 1,000 edits.

1,000 didChange notifications, in 50 bursts of 20 (typing, then a pause):
each burst is analysed once and published; the server's resident memory
(VmRSS) after the 10th burst and after the 50th may differ by at most
GROWTH_LIMIT_MIB. A server that keeps each analysis (its AST, its text,
its findings) grows with every burst and fails. Prints the figures.

usage: lsp_memory_test.py --fabricize BIN --stubs test/stubs
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lsp_client_test import Failure, check, start, stop  # noqa: E402
from nvim_test import PROGRAM as NVIM_PROGRAM  # noqa: E402

BURSTS, EDITS_PER_BURST, WARMUP_BURSTS = 50, 20, 10
GROWTH_LIMIT_MIB = 16

# The Neovim test's program, with a line that changes at each edit.
PROGRAM = NVIM_PROGRAM.rstrip("\n") + "\n// edit %d\n"


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise Failure("no VmRSS")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fabricize", required=True)
    parser.add_argument("--stubs", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "train.cpp")
        with open(path, "w") as f:
            f.write(PROGRAM % 0)
        with open(os.path.join(work, "compile_flags.txt"), "w") as f:
            f.write(f"-std=c++17\n-isystem\n{os.path.abspath(args.stubs)}\n")
        client = start([args.fabricize, "lsp"], work)
        uri = "file://" + path
        client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "cpp", "version": 0,
                                                                "text": PROGRAM % 0}})
        client.diagnostics(uri)
        version, samples = 0, {}
        try:
            for burst in range(1, BURSTS + 1):
                for _ in range(EDITS_PER_BURST):
                    version += 1
                    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                             "contentChanges": [{"text": PROGRAM % version}]})
                last = version
                message = client.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                                      and m["params"].get("version") == last, f"diagnostics of burst {burst}")
                check(any(d.get("code") == "fabric-backward" for d in message["params"]["diagnostics"]),
                      f"burst {burst}: no fabric-backward diagnostic")
                if burst in (WARMUP_BURSTS, BURSTS):
                    samples[burst] = rss_mib(client.process.pid)
            stop(client)
        except Failure as failure:
            print(f"LSP MEMORY TEST FAILED: {failure}")
            sys.exit(1)
    growth = samples[BURSTS] - samples[WARMUP_BURSTS]
    print(f"{version} edits in {BURSTS} bursts: VmRSS {samples[WARMUP_BURSTS]:.1f} MiB after burst "
          f"{WARMUP_BURSTS}, {samples[BURSTS]:.1f} MiB after burst {BURSTS} (growth {growth:+.1f} MiB, "
          f"limit {GROWTH_LIMIT_MIB})")
    if growth > GROWTH_LIMIT_MIB:
        print("LSP MEMORY TEST FAILED: the server's memory grows with the edits")
        sys.exit(1)
    print("LSP MEMORY TEST PASSED")


if __name__ == "__main__":
    main()
