#!/usr/bin/env python3
"""How long an editor waits for fabricize's diagnostics, beside clangd's own,
on the same file and the same edits, in one run.

A scripted LSP client opens a corpus-sized LibTorch file (a
compile_commands.json with LibTorch's flags beside it), waits, then types
into it: N edits at typing speed (one character each, --interval-ms apart),
then asks for code actions. For each server it reports:

  open      didOpen -> its first publishDiagnostics (cold: PCH and preamble)
  edit      each didChange -> the first publishDiagnostics for that text or a
            later one (what the user sees; a server that skips stale texts
            answers a skipped edit with a newer text's diagnostics),
            median and p95 over the edits
  last edit the last didChange -> the diagnostics of the final text
  action    textDocument/codeAction on the backward() line, median of 5

Servers: `fabricize lsp` and clangd-19 (`--background-index=false`), one
after the other, --rounds times, interleaved; with --compare-preamble also
`fabricize lsp --no-preamble` (the file's own includes parsed again at each
edit). Prints the ratios fabricize / clangd. Not a test: the machine is
noisy; compare in one run. The file is copied into a temporary folder; its
own folder stays on the include path, so a file of a multi-file project
(../shared/corpus/trainer_multifile/trainer.cpp) finds its headers.

  python3 bench/lsp_latency.py [--fabricize build/bin/fabricize] [--clangd clangd-19]
                               [--file F] [--edits 50] [--interval-ms 150] [--rounds 1]
                               [--compare-preamble] [--json out.json]
"""
import argparse
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TORCH_FLAGS = ["-std=c++17", "-isystem", "/usr/include/torch/csrc/api/include"]


class Server:
    def __init__(self, command, cwd):
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, cwd=cwd)
        self.messages = queue.Queue()
        self.next_id = 1
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        stream = self.process.stdout
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    self.messages.put(None)
                    return
                line = line.strip()
                if not line:
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            self.messages.put((time.monotonic(), json.loads(stream.read(length))))

    def send(self, message):
        body = json.dumps(message).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()
        return time.monotonic()

    def notify(self, method, params):
        return self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method, params, timeout=300):
        request_id = self.next_id
        self.next_id += 1
        sent = self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            got = self.messages.get(timeout=timeout)
            if got is None:
                raise RuntimeError(f"server ended while waiting for {method}")
            at, message = got
            if message.get("id") == request_id and "method" not in message:
                return at - sent, message
            if "id" in message and "method" in message:  # a request to us (clangd asks for progress)
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})

    def publishes(self, uri, until, timeout):
        """(time, version) of publishDiagnostics for uri, until `until(version)` or timeout."""
        found = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                got = self.messages.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if got is None:
                raise RuntimeError("server ended")
            at, message = got
            if "id" in message and "method" in message:
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
                continue
            if message.get("method") == "textDocument/publishDiagnostics" and message["params"]["uri"] == uri:
                version = message["params"].get("version", -1)
                found.append((at, version))
                if until(version):
                    break
        return found

    def stop(self):
        try:
            self.request("shutdown", None, timeout=30)
            self.notify("exit", None)
            self.process.wait(timeout=30)
        except Exception:
            self.process.kill()


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def measure(name, command, work, source, text, edits, interval):
    uri = "file://" + source
    server = Server(command, work)
    server.request("initialize", {"processId": os.getpid(), "rootUri": "file://" + work,
                                  "capabilities": {"textDocument": {"publishDiagnostics": {"versionSupport": True}}}})
    server.notify("initialized", {})
    opened = server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "cpp",
                                                                     "version": 1, "text": text}})
    first = server.publishes(uri, lambda v: True, 600)
    if not first:
        raise RuntimeError(f"{name}: no diagnostics after didOpen")
    open_ms = (first[0][0] - opened) * 1000
    time.sleep(2)
    while not server.messages.empty():
        server.messages.get()

    # Typing: one character at a time into a comment at the end of the file.
    sent = []
    typed = text + "\n// "
    for i in range(edits):
        typed += "abcdefghijklmnopqrstuvwxyz"[i % 26]
        version = 2 + i
        sent.append((version, server.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": typed}]})))
        time.sleep(interval)
    last = 1 + edits
    seen = server.publishes(uri, lambda v: v >= last, 300)
    latencies = []
    for version, at in sent:
        answer = next((t for t, v in seen if v >= version and t >= at), None)
        if answer is not None:
            latencies.append((answer - at) * 1000)
    final = next((t for t, v in seen if v >= last), None)
    settle_ms = (final - sent[-1][1]) * 1000 if final is not None else float("nan")
    line = next((i for i, l in enumerate(typed.split("\n")) if "backward" in l), 0)
    actions = []
    for _ in range(5):
        took, _ = server.request("textDocument/codeAction", {
            "textDocument": {"uri": uri},
            "range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 200}},
            "context": {"diagnostics": []}})
        actions.append(took * 1000)
    server.stop()
    return {"server": name, "open_ms": open_ms, "edits_answered": len(latencies), "edits": edits,
            "edit_median_ms": statistics.median(latencies) if latencies else float("nan"),
            "edit_p95_ms": percentile(latencies, 95) if latencies else float("nan"),
            "action_median_ms": statistics.median(actions), "analyses_published": len(seen),
            "settle_ms": settle_ms}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fabricize", default=os.path.join(ROOT, "build", "bin", "fabricize"))
    parser.add_argument("--clangd", default=shutil.which("clangd-19") or "clangd-19")
    corpus = os.path.join(ROOT, "..", "shared", "corpus", "transformer_lm", "train.cpp")
    parser.add_argument("--file", default=corpus if os.path.exists(corpus)
                        else os.path.join(ROOT, "examples", "sine_regression", "train.cpp"))
    parser.add_argument("--edits", type=int, default=50)
    parser.add_argument("--interval-ms", type=float, default=150)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--compare-preamble", action="store_true")
    parser.add_argument("--no-clangd", action="store_true",
                        help="fabricize only (with --compare-preamble: the two modes); no ratio to clangd")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.no_clangd and not args.compare_preamble:
        sys.exit("lsp_latency: --no-clangd needs --compare-preamble (something to compare with)")
    if not args.no_clangd and not os.path.exists(args.clangd) and not shutil.which(args.clangd):
        sys.exit(f"lsp_latency: {args.clangd} not found (apt-get install clangd-19)")
    results = []
    with tempfile.TemporaryDirectory() as work, tempfile.TemporaryDirectory() as cache:
        source = os.path.join(work, "train.cpp")
        shutil.copy(args.file, source)
        text = open(source).read()
        with open(os.path.join(work, "compile_commands.json"), "w") as f:
            json.dump([{"directory": work, "file": source,
                        "arguments": ["clang++"] + TORCH_FLAGS +
                                     ["-I", os.path.dirname(os.path.abspath(args.file)), "-c", source]}], f)
        os.environ["FABRICIZE_CACHE_DIR"] = cache
        servers = [("fabricize", [args.fabricize, "lsp"]),
                   ("clangd-19", [args.clangd, "--background-index=false", "--log=error"])]
        if args.no_clangd:
            servers.pop()
        if args.compare_preamble:
            servers.insert(1, ("fabricize --no-preamble", [args.fabricize, "lsp", "--no-preamble"]))
        for round_ in range(args.rounds):
            for name, command in servers:
                result = measure(name, command, work, source, text, args.edits, args.interval_ms / 1000)
                result["round"] = round_ + 1
                results.append(result)
                print(f"{name:23} round {round_ + 1}: open {result['open_ms']:7.0f} ms, edit median "
                      f"{result['edit_median_ms']:6.0f} ms, p95 {result['edit_p95_ms']:6.0f} ms "
                      f"({result['edits_answered']}/{result['edits']} edits, {result['analyses_published']} "
                      f"publishes), last edit -> its diagnostics {result['settle_ms']:6.0f} ms, code action "
                      f"{result['action_median_ms']:5.0f} ms", flush=True)
    by = {name: [r for r in results if r["server"] == name] for name, _ in servers}
    fab, cd = by["fabricize"], by.get("clangd-19", [])
    med = lambda rs, key: statistics.median(r[key] for r in rs)
    print(f"\nfile {os.path.relpath(args.file, ROOT)}, {args.edits} edits {args.interval_ms:.0f} ms apart, "
          f"{args.rounds} round(s)")
    measures = (("open_ms", "open"), ("edit_median_ms", "edit median"), ("edit_p95_ms", "edit p95"),
                ("settle_ms", "last edit"))
    for key, label in measures if cd else ():
        print(f"  {label:12} fabricize {med(fab, key):7.0f} ms  clangd-19 {med(cd, key):7.0f} ms  "
              f"ratio {med(fab, key) / med(cd, key):5.2f}")
    if args.compare_preamble:
        plain = by["fabricize --no-preamble"]
        for key, label in (("open_ms", "open"), ("edit_median_ms", "edit median"), ("edit_p95_ms", "edit p95"),
                           ("settle_ms", "last edit")):
            print(f"  {label:12} fabricize {med(fab, key):7.0f} ms  --no-preamble {med(plain, key):7.0f} ms  "
                  f"ratio {med(fab, key) / med(plain, key):5.2f}")
    print(f"  target: edit median <= 300 ms warm: {'met' if med(fab, 'edit_median_ms') <= 300 else 'NOT met'}", end="")
    if cd:
        print(f"; not slower than clangd: {'met' if med(fab, 'edit_median_ms') <= med(cd, 'edit_median_ms') else 'NOT met'}",
              end="")
    print()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
