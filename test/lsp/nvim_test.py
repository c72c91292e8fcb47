#!/usr/bin/env python3
"""A real editor drives `fabricize lsp`: headless Neovim (Debian's package)
with its built-in LSP client runs test/lsp/nvim_client.lua on a program
with non-ASCII text before the edits, and this checks that

- the diagnostics arrive, each (line, rule) once, with source "fabricize";
- the fabric-backward quick fix, applied by Neovim, changes exactly that
  line, to what the rule makes of it;
- after an undo, the "Migrate this file to Fabric" action, applied by
  Neovim, gives what `fabricize --stdout` gives for the file.

usage: nvim_test.py --fabricize BIN --stubs test/stubs
Exit 77 (ctest's skip code) with a loud message when nvim is not installed.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

PROGRAM = """#include <torch/torch.h>
int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    /* Größe ü€😀 */ auto x = torch::ones({2, 4}).cuda();
    auto loss = model->forward(x).sum();
    /* é😀 */ loss.backward();
    optimizer.step();
  }
}
"""
FIX_LINE = 9  # 1-based: the backward


def fail(message):
    print(f"NVIM TEST FAILED: {message}", flush=True)
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fabricize", required=True)
    parser.add_argument("--stubs", required=True)
    args = parser.parse_args()
    nvim = shutil.which("nvim")
    if not nvim:
        print("NVIM TEST SKIPPED: nvim is not installed (scripts/setup.sh installs Debian's neovim); "
              "the editor test was NOT run", flush=True)
        sys.exit(77)
    with tempfile.TemporaryDirectory() as work:
        source = os.path.join(work, "train.cpp")
        with open(source, "w", encoding="utf-8") as f:
            f.write(PROGRAM)
        with open(os.path.join(work, "compile_flags.txt"), "w") as f:
            f.write(f"-std=c++17\n-isystem\n{os.path.abspath(args.stubs)}\n")
        out = os.path.join(work, "result")
        env = dict(os.environ, FABRIC_NVIM_FILE=source, FABRIC_NVIM_FABRICIZE=os.path.abspath(args.fabricize),
                   FABRIC_NVIM_OUT=out, FABRIC_NVIM_FIX_LINE=str(FIX_LINE))
        lua = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nvim_client.lua")
        result = subprocess.run([nvim, "--headless", "--clean", "-c", f"luafile {lua}"], env=env, cwd=work,
                                capture_output=True, text=True, timeout=240)
        sys.stdout.write(result.stdout + result.stderr)
        if result.returncode != 0:
            fail(f"nvim exited {result.returncode}")

        with open(out + ".diagnostics", encoding="utf-8") as f:
            diagnostics = [line.split() for line in f.read().splitlines()]
        print("diagnostics:", diagnostics)
        keys = [(d[0].split(":")[0], d[1]) for d in diagnostics]
        if len(keys) != len(set(keys)):
            fail(f"a diagnostic appears twice: {diagnostics}")
        if not all(len(d) == 3 and d[2] == "fabricize" for d in diagnostics):
            fail(f"diagnostics without source fabricize: {diagnostics}")
        if (str(FIX_LINE), "fabric-backward") not in keys or ("7", "fabric-device-move") not in keys:
            fail(f"expected fabric-backward on line {FIX_LINE} and fabric-device-move on line 7: {diagnostics}")

        # Neovim turned the server's UTF-16 columns into byte columns: they
        # must land on the call after the multi-byte comment.
        line = PROGRAM.splitlines()[FIX_LINE - 1]
        column = line.encode("utf-8").index(b"loss.backward") + 1
        if [f"{FIX_LINE}:{column}", "fabric-backward", "fabricize"] not in diagnostics:
            fail(f"fabric-backward is not at {FIX_LINE}:{column} (bytes) in Neovim: {diagnostics}")

        with open(out + ".quickfix", encoding="utf-8") as f:
            fixed = f.read()
        expected = PROGRAM.splitlines()
        expected[FIX_LINE - 1] = "    /* é😀 */ fabric.backward(loss);"
        if fixed.splitlines() != expected:
            fail("the quick fix, applied by Neovim, did not give the expected text:\n" + fixed)

        stdout = subprocess.run([args.fabricize, source, "--stdout", "--quiet"], capture_output=True,
                                text=True, encoding="utf-8")
        if stdout.returncode not in (0, 1):
            fail(f"fabricize --stdout exited {stdout.returncode}:\n{stdout.stderr}")
        with open(out + ".migrated", encoding="utf-8") as f:
            migrated = f.read()
        if migrated != stdout.stdout:
            fail("the migration applied by Neovim differs from fabricize --stdout:\n--- neovim\n" + migrated +
                 "\n--- fabricize --stdout\n" + stdout.stdout)
    print("NVIM TEST PASSED: diagnostics, a quick fix and the whole migration applied by Neovim", flush=True)


if __name__ == "__main__":
    main()
