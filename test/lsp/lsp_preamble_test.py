#!/usr/bin/env python3
"""The language server's preamble: a document's own includes are
precompiled once and reused while edits leave them alone; while the user
types inside one top-level declaration, the declarations above it are
precompiled too (a declaration preamble); and an analysis with either
finds exactly what one without a preamble finds.

A CMake-style project (src/train.cpp including include/model.h, which
includes include/layers.h; the compile commands in build/) is edited step
by step in two servers at once, `fabricize lsp` and `fabricize lsp
--no-preamble`. At every step both publish the same diagnostics and offer
the same "Migrate this file to Fabric" edits, and `--log=info` says what
the preamble did:

  open                              built
  an edit at the end of main        reused
  typing on there                   built above main, then reused
  an edit in train (above main)     the include lines' reused (the new
                                    finding appears)
  typing on in train                built above train
  typing in a function inside       reused above train, then built above
    an `#if` block                  it (the open conditional replayed)
  typing in a function after an     the include lines' reused; the preamble
    attribute                       above it (which cuts the attribute from
                                    its function) refused once, said so
  an edit in the include lines      built again
  an unsaved edit of model.h        built again (the header's text is the
    (the editor's buffer)           editor's: train.cpp no longer compiles)
  model.h's buffer restored         built again, findings back
  a header that does not compile    no preamble; the parse error is shown

usage: lsp_preamble_test.py --fabricize BIN --stubs test/stubs
"""
import argparse
import json
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lsp_client_test import Failure, check, start, stop  # noqa: E402

LAYERS_H = """#pragma once
#include <torch/torch.h>
inline torch::Tensor scale(torch::Tensor x) { return x * 2; }
"""

MODEL_H = """#pragma once
#include <torch/torch.h>
#include "layers.h"
struct NetImpl : torch::nn::Module {
  NetImpl() : fc(register_module("fc", torch::nn::Linear(4, 1))) {}
  torch::Tensor forward(torch::Tensor x) { return fc(scale(x)); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);
inline torch::Tensor to_gpu(torch::Tensor x) { return x.cuda(); }
// The backward is here: the Fabric would reach it through train.cpp's calls.
inline void backward_and_step(torch::Tensor loss, torch::optim::SGD& optimizer) {
  loss.backward();
  optimizer.step();
}
void train(Net& net, torch::optim::SGD& optimizer, torch::Tensor x);
// train's address, taken here: no parameter can bring it the Fabric.
inline void (*const train_entry)(Net&, torch::optim::SGD&, torch::Tensor) = &train;
"""

TRAIN_CPP = """#include <torch/torch.h>
#include "model.h"
static int seed() { return 7; }
void train(Net& net, torch::optim::SGD& optimizer, torch::Tensor x) {
  optimizer.zero_grad();
  auto loss = net->forward(to_gpu(x)).sum();
  backward_and_step(loss, optimizer);
}
[[maybe_unused]] static int unused_helper() { return 1; }
#if 1
static int epochs() { return 2; }
static double learning_rate() { return 0.1; }
#endif
int main() {
  torch::manual_seed(seed());
  torch::Device device(torch::kCUDA);
  Net net;
  net->to(device);
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(learning_rate()));
  for (int epoch = 0; epoch < epochs(); ++epoch) {
    train(net, optimizer, torch::randn({8, 4}).to(device));
  }
}
"""

LOG_TIMEOUT_S = 30


def published_note(client, uri, version):
    """What --log=info said about the published analysis of `version`."""
    pattern = re.compile(r"fabricize lsp: published " + re.escape(uri) + r" version " + str(version) +
                         r" \((\d+) ms(?:, ([^)]*))?\)")
    deadline = time.monotonic() + LOG_TIMEOUT_S
    while time.monotonic() < deadline:
        for line in list(client.stderr):
            found = pattern.search(line)
            if found:
                # "preamble reused in 3 ms": what, then how long it took.
                note = re.sub(r" in \d+ ms", "", found.group(2) or "")
                return note, int(found.group(1))
        time.sleep(0.05)
    raise Failure(f"no 'published' log line for {uri} version {version}; stderr:\n" + "".join(client.stderr[-20:]))


def normalised(diagnostics):
    return sorted(json.dumps(d, sort_keys=True) for d in diagnostics)


class Editor:
    """The same edits, sent to both servers; their answers compared."""

    def __init__(self, fabricize, work, caches):
        # Each its own PCH cache: a PCH one server builds and renames into
        # place while the other uses it is a new file, and rightly orphans
        # the other's preamble; here it would only blur what is tested.
        os.environ["FABRICIZE_CACHE_DIR"] = caches[0]
        self.with_preamble = start([fabricize, "lsp", "--log=info"], work)
        os.environ["FABRICIZE_CACHE_DIR"] = caches[1]
        self.without = start([fabricize, "lsp", "--log=info", "--no-preamble"], work)
        self.versions = {}
        self.texts = {}

    def servers(self):
        return (("with the preamble", self.with_preamble), ("with --no-preamble", self.without))

    def send(self, path, text):
        uri = "file://" + path
        version = self.versions.get(uri, 0) + 1
        self.versions[uri] = version
        self.texts[uri] = text
        for _, client in self.servers():
            if version == 1:
                client.notify("textDocument/didOpen", {"textDocument": {
                    "uri": uri, "languageId": "cpp", "version": version, "text": text}})
            else:
                client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                         "contentChanges": [{"text": text}]})
        return uri, version

    def step(self, what, path, text, expect_note):
        """One edit: both servers agree; the preamble did `expect_note`."""
        uri, version = self.send(path, text)
        answers = []
        for name, client in self.servers():
            diagnostics = client.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                                      and m["params"]["uri"] == uri and m["params"].get("version") == version,
                                      f"diagnostics of {what}")["params"]["diagnostics"]
            note, ms = published_note(client, uri, version)
            lines = text.count("\n") + 1
            actions = client.request("textDocument/codeAction", {
                "textDocument": {"uri": uri},
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": lines, "character": 0}},
                "context": {"diagnostics": [], "only": ["source"]}})["result"]
            edits = [a["edit"]["changes"][uri] for a in actions if a["title"] == "Migrate this file to Fabric"]
            answers.append((name, diagnostics, edits, note, ms))
        (_, d1, e1, note, ms1), (_, d2, e2, note2, ms2) = answers
        check(normalised(d1) == normalised(d2),
              f"{what}: the diagnostics differ with and without the preamble:\n{d1}\n{d2}")
        check(e1 == e2, f"{what}: the migrate action's edits differ with and without the preamble:\n{e1}\n{e2}")
        check(note == expect_note, f"{what}: expected '{expect_note}', the server logged '{note}'")
        check(note2 == "", f"{what}: --no-preamble logged a preamble ('{note2}')")
        print(f"{what:45} {len(d1):2} diagnostics  {note or 'no preamble':16} {ms1:5} ms  "
              f"(--no-preamble {ms2:5} ms)")
        return d1


def codes(diagnostics):
    return sorted(d.get("code") for d in diagnostics)


def above(text, declaration):
    """The note of a declaration preamble that ends where `declaration` starts."""
    return f"preamble above line {text[:text.index(declaration)].count(chr(10)) + 1}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fabricize", required=True)
    parser.add_argument("--stubs", required=True)
    args = parser.parse_args()
    stubs = os.path.abspath(args.stubs)
    with tempfile.TemporaryDirectory() as work, tempfile.TemporaryDirectory() as cache:
        for folder in ("src", "include", "build"):
            os.makedirs(os.path.join(work, folder))
        train = os.path.join(work, "src", "train.cpp")
        model = os.path.join(work, "include", "model.h")
        files = {train: TRAIN_CPP, model: MODEL_H, os.path.join(work, "include", "layers.h"): LAYERS_H}
        for path, text in files.items():
            with open(path, "w") as f:
                f.write(text)
        build = os.path.join(work, "build")
        with open(os.path.join(build, "compile_commands.json"), "w") as f:
            json.dump([{"directory": build, "file": "../src/train.cpp",
                        "arguments": ["clang++", "-std=c++17", "-isystem", stubs, "-I", "../include",
                                      "-c", "../src/train.cpp"]}], f)

        editor = Editor(args.fabricize, work, [os.path.join(cache, "with"), os.path.join(cache, "without")])
        try:
            opened = editor.step("open", train, TRAIN_CPP, "preamble built")
            # model.h takes train's address, so no Fabric can be threaded into
            # train (nor the header's functions it calls): known only from
            # the header's own declarations, which the preamble holds.
            check("fabric-setup" in codes(opened) and "fabric-device-move" in codes(opened),
                  f"the program's findings are missing: {codes(opened)}")
            check("fabric-thread-fabric" not in codes(opened),
                  f"the Fabric is threaded into train, whose address model.h takes: {codes(opened)}")
            editor.step("edit in the body (a comment)", train, TRAIN_CPP + "// a comment\n", "preamble reused")
            # Typing on at the end: the declarations above main are precompiled.
            main_line = above(TRAIN_CPP, "int main")
            editor.step("typing on there", train, TRAIN_CPP + "// a comment.\n", main_line + " built")
            editor.step("typing on there again", train, TRAIN_CPP + "// a comment..\n", main_line + " reused")
            # Above that preamble's end: the include lines' preamble serves.
            typed = TRAIN_CPP.replace("  backward_and_step(loss, optimizer);\n",
                                      "  backward_and_step(loss, optimizer);\n  auto y = x.cuda();\n")
            more = editor.step("edit in the body (a new .cuda())", train, typed, "preamble reused")
            check(len(more) == len(opened) + 1, f"the new .cuda() was not reported: {codes(opened)} -> {codes(more)}")
            typed = typed.replace("auto y = x.cuda();", "auto y = x.cuda(); // y")
            editor.step("typing on in train", train, typed, above(typed, "void train") + " built")
            # Inside an #if block: reused above train, then built above
            # learning_rate, with the block's #if still open at its end.
            for i, rate in enumerate(("0.2", "0.25", "0.255")):
                typed = re.sub(r"return 0\.\d+;", f"return {rate};", typed)
                note = above(typed, "void train") + " reused" if i == 0 else \
                    above(typed, "static double learning_rate") + (" built" if i == 1 else " reused")
                inside = editor.step(f"typing in an #if block ({rate})", train, typed, note)
                check(codes(inside) == codes(more), f"findings while typing in the #if block: {codes(inside)}")
            # An attribute before the declaration typed in: a preamble that
            # ends where the declaration starts cuts the two apart, does not
            # compile, and is refused once; the include lines' serves.
            refused = "; the declarations above line " + str(typed[:typed.index("static int unused")].count("\n") + 1) + \
                " do not compile on their own"
            for i, note in enumerate(("preamble reused", "preamble reused" + refused, "preamble reused")):
                typed = re.sub(r"return 1[0-9]*;", "return 1" + "0" * (i + 1) + ";", typed)
                attributed = editor.step(f"typing after an attribute ({i})", train, typed, note)
                check(codes(attributed) == codes(more), f"findings while typing after an attribute: {codes(attributed)}")
            with_define = "#define EPOCHS 2\n" + typed
            editor.step("edit in the include lines", train, with_define, "preamble built")
            editor.step("edit in the body again", train, with_define + "// again\n", "preamble reused")

            # The header as the editor holds it, unsaved: to_gpu is gone, and
            # train (above main, where the user types on) no longer compiles:
            # the declaration preamble is refused, the include lines' rebuilt.
            editor.send(model, MODEL_H.replace("inline torch::Tensor to_gpu", "inline torch::Tensor renamed_to_gpu"))
            broken = editor.step("model.h edited in the editor (unsaved)", train, with_define + "// 1\n",
                                 "preamble built; the declarations " + above(with_define, "int main")[9:] +
                                 " do not compile on their own")
            check("parse-error" in codes(broken), f"the unsaved header was not used: {codes(broken)}")
            editor.send(model, MODEL_H)
            # Typed at the end three times: a declaration preamble, refused
            # while train.cpp did not compile, is built once the header is back.
            main_line = above(with_define, "int main")
            restored = editor.step("model.h's buffer restored", train, with_define + "// 2\n", main_line + " built")
            check(codes(restored) == codes(more), f"findings after the header came back: {codes(restored)}")
            editor.step("edit in the body after that", train, with_define + "// 3\n", main_line + " reused")

            # A header that does not compile: no preamble, the parse error shown.
            editor.send(model, MODEL_H + "struct Broken {\n")
            failing = editor.step("model.h broken", train, with_define + "// 4\n", "")
            check("parse-error" in codes(failing), f"a broken header is not reported: {codes(failing)}")
            for path, text in files.items():
                with open(path) as f:
                    check(f.read() == text, f"{path} was written to")
        finally:
            for _, client in editor.servers():
                stop(client)
    print("lsp preamble: reused across body edits, rebuilt when the includes or an open header change, "
          "extended over the declarations above the one being typed in; "
          "the same diagnostics and migration as without it")


if __name__ == "__main__":
    try:
        main()
    except Failure as failure:
        print(f"FAIL: {failure}", file=sys.stderr)
        sys.exit(1)
