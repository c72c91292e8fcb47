#!/usr/bin/env python3
"""Drives `fabricize lsp` as an editor would, over stdio, and checks:

- initialize advertises full text sync and code actions;
- didOpen analyses the in-memory text (the file on disk differs), with the
  compile command found in compile_commands.json above the file, and quoted
  includes resolved next to the original file; a header open in the editor
  is parsed as its unsaved text, and nothing is written to disk;
- diagnostics carry the rule id as code, source "fabricize", UTF-16 columns;
- the quick fix's edits are exactly the rule's edits (as `fabricize lint
  --format json` reports them), and the "Migrate this file to Fabric"
  action's edits, applied, give what `fabricize --stdout` gives;
- didChange and didSave re-analyse, once per burst of edits (typing): 20
  edits sent together are published once, for the last text; an edit
  cancels the running analysis of an older text (a text that takes seconds
  to parse is never published: its analysis stops within a second of the
  edit); a text that does not parse gets an
  error diagnostic; .fabricize.json selects rules as in lint; didClose
  clears diagnostics;
- malformed JSON, an unknown method and bad params get JSON-RPC errors and
  the server keeps serving; shutdown then exit ends it with status 0;
- in a CMake layout (src/, include/, the compile commands in build/) the
  server finds the commands as clangd does: a source parses with its
  command (its project headers found through -I), a header with the command
  of a source (interpolated); --compile-commands-dir names the folder
  instead, and a folder without compile commands is refused.

usage: lsp_client_test.py --fabricize BIN --stubs test/stubs
"""
import argparse
import json
import shutil
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time

TIMEOUT_S = 120

PROGRAM = """#include <torch/torch.h>
#include "helper.h"
int main() {
  torch::Tensor x = make_input();
  /* ü€😀 */ auto y = x.cuda();
  auto loss = y.sum();
  loss.backward();
}
"""

HELPER = """#pragma once
#include <torch/torch.h>
inline torch::Tensor make_input() { return torch::randn({2}); }
"""


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


class Client:
    def __init__(self, command):
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
        self.messages = queue.Queue()
        self.stderr = []
        self.next_id = 1
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

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
            if length is None:
                self.messages.put({"framing error": True})
                return
            self.messages.put(json.loads(stream.read(length)))

    def _drain_stderr(self):
        for line in self.process.stderr:
            self.stderr.append(line.decode(errors="replace"))

    def send_raw(self, body):
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def notify(self, method, params):
        self.send_raw(json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode())

    def request(self, method, params):
        request_id = self.next_id
        self.next_id += 1
        self.send_raw(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                                  "params": params}).encode())
        return self.wait(lambda m: m.get("id") == request_id and "method" not in m, method)

    def wait(self, predicate, what):
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            remaining = deadline - time.monotonic()
            check(remaining > 0, f"no answer to {what} within {TIMEOUT_S} s")
            try:
                message = self.messages.get(timeout=remaining)
            except queue.Empty:
                continue
            check(message is not None, f"the server closed its output while waiting for {what}; "
                                       f"stderr:\n{''.join(self.stderr)}")
            check("framing error" not in message, "a message without Content-Length")
            if predicate(message):
                return message

    def diagnostics(self, uri):
        message = self.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                            and m["params"]["uri"] == uri, "publishDiagnostics")
        return message["params"]["diagnostics"]


def offset_of(text, position):
    """The str index of an LSP position (line, UTF-16 character)."""
    lines = text.split("\n")
    before = sum(len(l) + 1 for l in lines[:position["line"]])
    line = lines[position["line"]]
    units = 0
    for index, char in enumerate(line):
        if units >= position["character"]:
            return before + index
        units += 2 if ord(char) > 0xFFFF else 1
    return before + len(line)


def apply_edits(text, edits):
    # Inserts at one position appear in array order (LSP 3.17 TextEdit).
    spans = sorted(((offset_of(text, e["range"]["start"]), index, offset_of(text, e["range"]["end"]), e["newText"])
                    for index, e in enumerate(edits)), reverse=True)
    for i in range(1, len(spans)):
        check(spans[i][2] <= spans[i - 1][0], f"overlapping edits: {spans}")
    for start, _, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def utf16_length(s):
    return sum(2 if ord(c) > 0xFFFF else 1 for c in s)


def run(fabricize, stubs):
    with tempfile.TemporaryDirectory() as work, tempfile.TemporaryDirectory() as cache:
        # The PCH cache of this test alone: the batch tools and the server share it.
        os.environ["FABRICIZE_CACHE_DIR"] = cache
        source = os.path.join(work, "train.cpp")
        uri = "file://" + source
        # On disk: a program the rules find nothing in; the editor's text differs.
        with open(source, "w") as f:
            f.write("int answer() { return 42; }\n")
        with open(os.path.join(work, "helper.h"), "w") as f:
            f.write(HELPER)
        flags = ["-std=c++17", "-isystem", stubs]
        with open(os.path.join(work, "compile_commands.json"), "w") as f:
            json.dump([{"directory": work, "file": "train.cpp",
                        "arguments": ["clang++"] + flags + ["-c", "train.cpp"]}], f)

        # What the batch tools say about the same text.
        copy = os.path.join(work, "expected_input.cpp")
        with open(copy, "w") as f:
            f.write(PROGRAM)
        expected_migration = subprocess.run(
            [fabricize, "--stdout", "--quiet", copy, "--"] + flags, capture_output=True, text=True)
        check(expected_migration.returncode == 0, f"fabricize --stdout failed: {expected_migration.stderr}")
        lint = subprocess.run([fabricize, "lint", "--format", "json", copy, "--"] + flags,
                              capture_output=True, text=True)
        check(lint.returncode == 1, f"fabricize lint: exit {lint.returncode}: {lint.stderr}")
        lint_findings = json.loads(lint.stdout)["findings"]

        # --coalesce-ms: every edit cancels what runs for an older text, however
        # slow this machine is; --log=info: the test sees what started.
        client = Client([fabricize, "lsp", "--coalesce-ms=600000", "--log=info"])
        try:
            # Before initialize: refused with ServerNotInitialized.
            early = client.request("textDocument/codeAction", {})
            check(early.get("error", {}).get("code") == -32002, f"request before initialize: {early}")

            init = client.request("initialize", {"processId": os.getpid(), "rootUri": "file://" + work,
                                                 "capabilities": {}})
            capabilities = init["result"]["capabilities"]
            sync = capabilities["textDocumentSync"]
            check(sync == 1 or (isinstance(sync, dict) and sync.get("change") == 1 and sync.get("openClose")),
                  f"textDocumentSync is not full: {sync}")
            check(capabilities.get("codeActionProvider"), "no codeActionProvider")
            client.notify("initialized", {})

            client.notify("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": "cpp", "version": 1, "text": PROGRAM}})
            diagnostics = client.diagnostics(uri)
            codes = sorted(d["code"] for d in diagnostics)
            check(codes == ["fabric-backward", "fabric-device-move", "fabric-insert", "fabric-launch"],
                  f"diagnostic codes {codes}; stderr:\n{''.join(client.stderr)}")
            check(all(d["source"] == "fabricize" and d["message"] for d in diagnostics),
                  f"source/message: {diagnostics}")
            # The server's command (the file's own, plus -iquote of its folder)
            # uses the PCH the batch tools built: one for both.
            pchs = sorted(f for f in os.listdir(cache) if f.endswith(".pch"))
            check(len(pchs) == 1, f"one PCH for the batch tools and the server, found {pchs}")
            by_code = {d["code"]: d for d in diagnostics}
            lines = PROGRAM.split("\n")
            move = by_code["fabric-device-move"]["range"]["start"]
            check(move["line"] == 4 and move["character"] == utf16_length(lines[4][:lines[4].index("x.cuda")]),
                  f"device-move position {move} is not in UTF-16 code units")
            backward = by_code["fabric-backward"]["range"]
            check(backward["start"] == {"line": 6, "character": 2}, f"backward range {backward}")

            # Quick fix on the backward line: exactly the rule's edit.
            whole = {"start": {"line": 0, "character": 0}, "end": {"line": len(lines), "character": 0}}
            actions = client.request("textDocument/codeAction", {
                "textDocument": {"uri": uri}, "range": backward,
                "context": {"diagnostics": [by_code["fabric-backward"]]}})["result"]
            fixes = [a for a in actions if a["kind"] == "quickfix"]
            check(len(fixes) == 1 and fixes[0]["diagnostics"][0]["code"] == "fabric-backward",
                  f"quick fixes on the backward line: {actions}")
            edits = fixes[0]["edit"]["changes"][uri]
            lint_fix = [f for f in lint_findings if f["ruleId"] == "fabric-backward"][0]["fixes"]
            def byte_offset(position):  # lint reports byte offsets
                return len(PROGRAM[:offset_of(PROGRAM, position)].encode())
            as_offsets = [(byte_offset(e["range"]["start"]),
                           byte_offset(e["range"]["end"]) - byte_offset(e["range"]["start"]),
                           e["newText"]) for e in edits]
            check(as_offsets == [(f["offset"], f["length"], f["replacement"]) for f in lint_fix],
                  f"quick fix {as_offsets} differs from the rule's edits {lint_fix}")
            check(apply_edits(PROGRAM, edits).split("\n")[6] == "  fabric.backward(loss);",
                  "the quick fix does not rewrite the backward call")

            # The source action migrates the whole file, as `fabricize --stdout` does.
            actions = client.request("textDocument/codeAction", {
                "textDocument": {"uri": uri}, "range": whole, "context": {"diagnostics": diagnostics}})["result"]
            migrate = [a for a in actions if a["title"] == "Migrate this file to Fabric"]
            check(len(migrate) == 1 and migrate[0]["kind"].startswith("source"), f"source actions: {actions}")
            migrated = apply_edits(PROGRAM, migrate[0]["edit"]["changes"][uri])
            check(migrated == expected_migration.stdout,
                  f"migrate action gives\n{migrated}\nfabricize --stdout gives\n{expected_migration.stdout}")
            only = client.request("textDocument/codeAction", {
                "textDocument": {"uri": uri}, "range": whole,
                "context": {"diagnostics": [], "only": ["source"]}})["result"]
            check([a["title"] for a in only] == ["Migrate this file to Fabric"], f"only=source: {only}")

            # The migrated text has nothing left to report.
            client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                                     "contentChanges": [{"text": migrated}]})
            check(client.diagnostics(uri) == [], "the migrated text still has diagnostics")

            # A header open in the editor is parsed as the editor holds it: a
            # function that exists only in its unsaved text is found.
            helper_uri = "file://" + os.path.join(work, "helper.h")
            client.notify("textDocument/didOpen", {"textDocument": {
                "uri": helper_uri, "languageId": "cpp", "version": 1,
                "text": HELPER + "inline torch::Tensor make_unsaved() { return torch::ones({2}); }\n"}})
            client.diagnostics(helper_uri)
            client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                                     "contentChanges": [{"text": PROGRAM.replace("make_input()", "make_unsaved()")}]})
            unsaved = client.diagnostics(uri)
            check(not any(d.get("code") == "parse-error" for d in unsaved) and
                  any(d.get("code") == "fabric-backward" for d in unsaved),
                  f"the unsaved header was not used: {unsaved}")
            client.notify("textDocument/didClose", {"textDocument": {"uri": helper_uri}})
            with open(os.path.join(work, "helper.h")) as f:
                check(f.read() == HELPER, "the server wrote the unsaved header to disk")

            # Typing: 20 edits in one burst make one analysis, of the last text
            # (its extra .cuda() line is reported), not one per keystroke.
            burst = b""
            for i in range(1, 21):
                text = PROGRAM + "// " + "x" * i + "\n" + ("void typed(torch::Tensor t) { t.cuda(); }\n" if i == 20 else "")
                body = json.dumps({"jsonrpc": "2.0", "method": "textDocument/didChange",
                                   "params": {"textDocument": {"uri": uri, "version": 10 + i},
                                              "contentChanges": [{"text": text}]}}).encode()
                burst += b"Content-Length: %d\r\n\r\n" % len(body) + body
            client.process.stdin.write(burst)
            client.process.stdin.flush()
            published = [client.diagnostics(uri)]
            time.sleep(3)
            while not client.messages.empty():
                message = client.messages.get()
                if message and message.get("method") == "textDocument/publishDiagnostics" and \
                        message["params"]["uri"] == uri:
                    published.append(message["params"]["diagnostics"])
            last_line = len(text.split("\n")) - 2
            check(len(published) == 1, f"a burst of 20 edits was published {len(published)} times")
            check(any(d["range"]["start"]["line"] == last_line for d in published[-1]),
                  f"the published diagnostics are not those of the last text (line {last_line}): {published[-1]}")

            # An edit cancels the analysis it made stale: a text of 20000
            # functions (seconds to parse) is superseded as soon as its
            # analysis has started; it is never published, and the next text's
            # diagnostics come without waiting for it.
            slow = PROGRAM + "".join(f"torch::Tensor f{i}(torch::Tensor t) {{ auto y = t * {i}; return y.sum(); }}\n"
                                     for i in range(20000))
            started_lines = len(client.stderr)
            client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 40},
                                                     "contentChanges": [{"text": slow}]})
            deadline = time.monotonic() + TIMEOUT_S
            while not any("analysing " + uri + " version 40" in l for l in client.stderr[started_lines:]):
                check(time.monotonic() < deadline, f"the analysis of version 40 never started: {client.stderr}")
                time.sleep(0.01)
            edited = time.monotonic()
            client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 41},
                                                     "contentChanges": [{"text": PROGRAM}]})
            message = client.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                                  and m["params"]["uri"] == uri, "publishDiagnostics after the cancelling edit")
            waited = time.monotonic() - edited
            check(message["params"].get("version") == 41,
                  f"published version {message['params'].get('version')}, not 41: the stale text was not cancelled")
            check(any("cancelled" in l and "version 40" in l for l in client.stderr[started_lines:]),
                  f"no cancellation of version 40 logged: {client.stderr[started_lines:]}")
            check(len(message["params"]["diagnostics"]) == 4, f"version 41: {message['params']['diagnostics']}")
            print(f"cancelled a slow analysis; the next text's diagnostics {waited * 1000:.0f} ms after the edit")

            # A text that does not parse says so.
            broken = PROGRAM.replace("make_input()", "undeclared_thing()")
            client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 3},
                                                     "contentChanges": [{"text": broken}]})
            diagnostics = client.diagnostics(uri)
            check(len(diagnostics) == 1 and diagnostics[0]["severity"] == 1
                  and diagnostics[0]["code"] == "parse-error", f"broken text: {diagnostics}")

            client.notify("textDocument/didSave", {"textDocument": {"uri": uri}, "text": PROGRAM})
            check(len(client.diagnostics(uri)) == 4, "didSave with text did not re-analyse")

            # The lint's .fabricize.json applies; a broken one is shown, not obeyed.
            config = os.path.join(work, ".fabricize.json")
            with open(config, "w") as f:
                json.dump({"ignore": ["fabric-insert", "fabric-launch"]}, f)
            client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
            codes = sorted(d["code"] for d in client.diagnostics(uri))
            check(codes == ["fabric-backward", "fabric-device-move"], f"with the config: {codes}")
            with open(config, "w") as f:
                json.dump({"selekt": []}, f)
            client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
            codes = sorted(d["code"] for d in client.diagnostics(uri))
            check(codes == ["config-error", "fabric-backward", "fabric-device-move", "fabric-insert",
                            "fabric-launch"], f"with a broken config: {codes}")
            os.remove(config)

            # Garbage and unknowns: errors, and the server keeps going.
            client.send_raw(b"{this is not json")
            error = client.wait(lambda m: "error" in m and m.get("id") is None, "a parse error")
            check(error["error"]["code"] == -32700, f"malformed JSON: {error}")
            unknown = client.request("workspace/noSuchMethod", {})
            check(unknown.get("error", {}).get("code") == -32601, f"unknown method: {unknown}")
            bad = client.request("textDocument/codeAction", {"range": whole})
            check(bad.get("error", {}).get("code") == -32602, f"missing params: {bad}")
            client.send_raw(b"[1, 2, 3]")
            invalid = client.wait(lambda m: "error" in m and m.get("id") is None, "an invalid request")
            check(invalid["error"]["code"] == -32600, f"not a request: {invalid}")
            client.notify("$/cancelRequest", {"id": 99})  # ignored, as the protocol allows
            # Values of the wrong shape (a fractional or negative position used to
            # be converted to unsigned: undefined behaviour).
            for name, position in [("fractional", {"line": 1.5, "character": 0}),
                                   ("negative", {"line": -1, "character": 0}),
                                   ("string", {"line": "1", "character": 0})]:
                answer = client.request("textDocument/codeAction", {
                    "textDocument": {"uri": uri}, "range": {"start": position, "end": position},
                    "context": {"diagnostics": []}})
                check(answer.get("error", {}).get("code") == -32602
                      and "non-negative integer" in answer["error"]["message"], f"{name} position: {answer}")
            answer = client.request("textDocument/codeAction", [uri])
            check(answer.get("error", {}).get("code") == -32602
                  and "params must be an object" in answer["error"]["message"], f"params as a list: {answer}")
            client.send_raw(json.dumps({"jsonrpc": "2.0", "id": 2.5, "method": "shutdown"}).encode())
            answer = client.wait(lambda m: "error" in m and m.get("id") is None, "a fractional id")
            check(answer["error"]["code"] == -32600, f"fractional id: {answer}")
            # Framing: a length that is not a number, and one far beyond the
            # 64 MiB limit: read through without reserving it, then the
            # session goes on.
            client.process.stdin.write(b"Content-Length: 12abc\r\n\r\n")
            client.process.stdin.flush()
            answer = client.wait(lambda m: "error" in m and m.get("id") is None, "a bad Content-Length")
            check(answer["error"]["code"] == -32700 and "Content-Length" in answer["error"]["message"],
                  f"bad Content-Length: {answer}")
            client.send_raw(b" " * ((64 << 20) + 1))
            answer = client.wait(lambda m: "error" in m and m.get("id") is None, "an oversized message")
            check(answer["error"]["code"] == -32700 and "larger than" in answer["error"]["message"],
                  f"oversized message: {answer}")
            alive = client.request("workspace/noSuchMethod", {})
            check(alive.get("error", {}).get("code") == -32601, f"after the oversized message: {alive}")

            client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
            check(client.diagnostics(uri) == [], "didClose did not clear the diagnostics")

            shutdown = client.request("shutdown", None)
            check("result" in shutdown and shutdown["result"] is None, f"shutdown: {shutdown}")
            client.notify("exit", None)
            code = client.process.wait(timeout=30)
            check(code == 0, f"exit code {code} after shutdown/exit")
        finally:
            if client.process.poll() is None:
                client.process.kill()
                client.process.wait()
        with open(source) as f:
            check(f.read() == "int answer() { return 42; }\n", "the server wrote to the file on disk")
        check(sorted(os.listdir(work)) == ["compile_commands.json", "expected_input.cpp", "helper.h",
                                           "train.cpp"], f"files left next to the source: {os.listdir(work)}")


MODEL_H = """#pragma once
#ifndef PROJECT_BUILD
#error "parsed without the project's compile command"
#endif
#include <torch/torch.h>
inline torch::Tensor to_gpu(torch::Tensor x) { return x.cuda(); }
"""

TRAIN_CPP = """#include <torch/torch.h>
#include "model.h"
int main() {
  torch::Tensor x = to_gpu(torch::randn({2}));
  auto loss = x.sum();
  loss.backward();
}
"""


def open_and_diagnose(client, path, text):
    uri = "file://" + path
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "cpp", "version": 1,
                                                            "text": text}})
    return client.diagnostics(uri)


def start(command, root):
    client = Client(command)
    client.request("initialize", {"processId": os.getpid(), "rootUri": "file://" + root, "capabilities": {}})
    client.notify("initialized", {})
    return client


def stop(client):
    client.request("shutdown", None)
    client.notify("exit", None)
    code = client.process.wait(timeout=30)
    time.sleep(0.2)  # let the stderr reader take the last lines
    check(code == 0, f"the server did not exit 0 (exit {code}); its stderr ends:\n" + "".join(client.stderr[-40:]))


def run_project_layout(fabricize, stubs):
    with tempfile.TemporaryDirectory() as work, tempfile.TemporaryDirectory() as cache:
        os.environ["FABRICIZE_CACHE_DIR"] = cache
        for folder in ("src", "include", "build", "elsewhere"):
            os.makedirs(os.path.join(work, folder))
        train, model = os.path.join(work, "src", "train.cpp"), os.path.join(work, "include", "model.h")
        for path, text in ((train, TRAIN_CPP), (model, MODEL_H)):
            with open(path, "w") as f:
                f.write(text)
        build = os.path.join(work, "build")
        database = [{"directory": build, "file": "../src/train.cpp",
                     "arguments": ["clang++", "-std=c++17", "-DPROJECT_BUILD", "-isystem", stubs, "-I", "../include",
                                   "-c", "../src/train.cpp"]}]
        with open(os.path.join(build, "compile_commands.json"), "w") as f:
            json.dump(database, f)

        def parsed(diagnostics, what):
            broken = [d["message"] for d in diagnostics if d.get("code") == "parse-error"]
            check(not broken, f"{what}: the compile command was not found: {broken}")
            check(any(str(d.get("code", "")).startswith("fabric-") for d in diagnostics),
                  f"{what}: no rule diagnostics: {diagnostics}")
            return sorted({d["code"] for d in diagnostics})

        client = start([fabricize, "lsp"], work)
        try:
            codes = parsed(open_and_diagnose(client, train, TRAIN_CPP), "src/train.cpp (build/compile_commands.json)")
            check("fabric-backward" in codes, f"src/train.cpp: {codes}")
            header_codes = parsed(open_and_diagnose(client, model, MODEL_H), "include/model.h (interpolated)")
            stop(client)
        finally:
            if client.process.poll() is None:
                client.process.kill()

        # The commands elsewhere, named by --compile-commands-dir.
        os.rename(os.path.join(build, "compile_commands.json"), os.path.join(work, "elsewhere", "compile_commands.json"))
        client = start([fabricize, "lsp", "--compile-commands-dir=" + os.path.join(work, "elsewhere")], work)
        try:
            parsed(open_and_diagnose(client, train, TRAIN_CPP), "src/train.cpp (--compile-commands-dir)")
            stop(client)
        finally:
            if client.process.poll() is None:
                client.process.kill()
        refused = subprocess.run([fabricize, "lsp", "--compile-commands-dir=" + os.path.join(work, "include")],
                                 capture_output=True, text=True, input="")
        check(refused.returncode == 2 and "--compile-commands-dir" in refused.stderr,
              f"a folder without compile commands: exit {refused.returncode}: {refused.stderr}")
        print(f"CMake layout: src/train.cpp {codes}, include/model.h {header_codes}")


def run_header_brings_fabric(fabricize, stubs):
    """The migrate action on a source whose project header gets the runtime
    (test/tool/Inputs/project: trainer.h holds the Fabric for its member):
    no include of its own, as migrate writes it (tool/services/FabricInclude.cpp)."""
    with tempfile.TemporaryDirectory() as work, tempfile.TemporaryDirectory() as cache:
        os.environ["FABRICIZE_CACHE_DIR"] = cache
        project = os.path.join(work, "project")
        shutil.copytree(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tool", "Inputs", "project"),
                        project)
        source = os.path.join(project, "src", "trainer.cpp")
        database = [{"directory": project, "file": source,
                     "arguments": ["clang++", "-std=c++17", "-isystem", stubs, "-c", source]}]
        with open(os.path.join(project, "compile_commands.json"), "w") as f:
            json.dump(database, f)
        with open(source) as f:
            text = f.read()
        uri = "file://" + source
        client = start([fabricize, "lsp"], project)
        try:
            open_and_diagnose(client, source, text)
            lines = text.split("\n")
            whole = {"start": {"line": 0, "character": 0}, "end": {"line": len(lines), "character": 0}}
            actions = client.request("textDocument/codeAction", {
                "textDocument": {"uri": uri}, "range": whole,
                "context": {"diagnostics": [], "only": ["source"]}})["result"]
            migrate = [a for a in actions if a["title"] == "Migrate this file to Fabric"]
            check(len(migrate) == 1, f"trainer.cpp: source actions: {actions}")
            migrated = apply_edits(text, migrate[0]["edit"]["changes"][uri])
            check("fabric_.backward(" in migrated, f"trainer.cpp not migrated:\n{migrated}")
            check("<fabric/fabric.h>" not in migrated,
                  f"trainer.cpp got the include its header trainer.h brings:\n{migrated}")
            stop(client)
        finally:
            if client.process.poll() is None:
                client.process.kill()
        print("header brings the runtime: the migrate action adds no include to trainer.cpp")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fabricize", required=True)
    parser.add_argument("--stubs", required=True)
    args = parser.parse_args()
    start = time.monotonic()
    try:
        run(os.path.abspath(args.fabricize), os.path.abspath(args.stubs))
        run_project_layout(os.path.abspath(args.fabricize), os.path.abspath(args.stubs))
        run_header_brings_fabric(os.path.abspath(args.fabricize), os.path.abspath(args.stubs))
    except Failure as failure:
        print(f"FAIL: {failure}", file=sys.stderr)
        return 1
    print(f"lsp client test passed in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
