// libFuzzer target: `fabricize lsp`'s protocol layer (LspServer) on
// arbitrary bytes from the client.
//
// Input: byte 0 holds flags, the rest is what the client sends.
//   bit 0: an `initialize` request is sent first (reaches the document
//          methods without the fuzzer finding the handshake);
//   bit 1: the rest is split at 0x1e bytes into message bodies, each framed
//          with a correct Content-Length header; otherwise it is the raw
//          stream, headers and all.
//
// Checked after each input: serve() returned 0 or 1; everything the server
// wrote is a sequence of correctly framed JSON-RPC 2.0 objects (each a
// response with exactly one of result/error, or a notification), so a client
// can always read on. ASan/UBSan catch the rest.
//
// The analyser is a deterministic stand-in (a finding with a removal fix-it
// at every ".cuda()", a replacement at every "backward(", the migration
// being their merge, "#error" marking a file that does not compile, and a
// line "//fabricize-config: <json>" standing for a .fabricize.json): a Clang
// parse per input would bring the fuzzer to a few inputs a second. The real
// analysis is driven by test/lsp/lsp_client_test.py.
#include "lsp/LspServer.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

using namespace fabricize;

namespace {

const std::vector<std::string> kRuleIds = {"fabric-cuda-call", "fabric-backward", "fabric-setup"};

void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_lsp: %s: %s\n", what, detail.substr(0, 400).c_str());
  std::abort();
}

void standInAnalyser(LspDocument& doc, const std::atomic<bool>&) {
  if (doc.path.empty()) return;
  if (doc.text.find("#error") != std::string::npos) {
    doc.parsed = false;
    return;
  }
  RuleSelection selection;
  size_t config = doc.text.find("//fabricize-config: ");
  if (config != std::string::npos) {
    size_t begin = config + 20, end = doc.text.find('\n', begin);
    std::string json = doc.text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    if (!parseRuleSelection(json, ".fabricize.json", kRuleIds, selection, doc.configError)) selection = {};
  }
  std::vector<TextEdit> all;
  auto findAll = [&](const std::string& needle, const std::string& id, unsigned removeFrom, unsigned removeLength,
                     const std::string& replacement) {
    for (size_t at = doc.text.find(needle); at != std::string::npos; at = doc.text.find(needle, at + 1)) {
      LintFinding f;
      f.ruleId = id;
      f.file = doc.path;
      lineAndColumn(doc.text, static_cast<unsigned>(at), f.line, f.column);
      f.message = id + " finding";
      TextEdit edit;
      edit.offset = static_cast<unsigned>(at) + removeFrom;
      edit.length = removeLength;
      edit.replacement = replacement;
      edit.ruleId = id;
      edit.line = f.line;
      edit.column = f.column;
      f.edits.push_back(edit);
      if (!selection.admits(id) || isSuppressed(doc.text, f.line, id)) continue;
      all.push_back(edit);
      doc.findings.push_back(std::move(f));
    }
  };
  findAll(".cuda()", "fabric-cuda-call", 0, 7, "");
  findAll("backward(", "fabric-backward", 0, 8, "fabric.backward");
  doc.migrateEdits = mergeEdits(doc.text, all).edits;
}

// Every message the server wrote, framed and well formed.
void checkOutput(const std::string& out) {
  size_t at = 0;
  while (at < out.size()) {
    static const std::string kHeader = "Content-Length: ";
    if (out.compare(at, kHeader.size(), kHeader) != 0) fail("output is not framed", out.substr(at));
    size_t end = out.find("\r\n\r\n", at);
    if (end == std::string::npos) fail("header without end", out.substr(at));
    size_t length = std::stoul(out.substr(at + kHeader.size(), end - at - kHeader.size()));
    size_t body = end + 4;
    if (body + length > out.size()) fail("Content-Length past the end of the output", out.substr(at));
    nlohmann::json message;
    try {
      message = nlohmann::json::parse(out.substr(body, length));
    } catch (const std::exception& e) {
      fail("the server wrote invalid JSON", out.substr(body, length));
    }
    if (!message.is_object() || message.value("jsonrpc", "") != "2.0") fail("not JSON-RPC 2.0", message.dump());
    if (message.contains("id")) {
      if (message.contains("result") == message.contains("error")) fail("response needs result xor error", message.dump());
      if (message.contains("error") && (!message["error"].contains("code") || !message["error"]["code"].is_number_integer() ||
                                        !message["error"].contains("message")))
        fail("error without code and message", message.dump());
    } else if (!message.contains("method")) {
      fail("neither a response nor a notification", message.dump());
    }
    at = body + length;
  }
}

std::string framed(const std::string& body) { return "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  uint8_t flags = data[0];
  std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string stream;
  if (flags & 1) stream += framed(R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{}})");
  if (flags & 2) {
    size_t begin = 0;
    for (size_t sep = rest.find('\x1e'); ; sep = rest.find('\x1e', begin)) {
      stream += framed(rest.substr(begin, sep == std::string::npos ? std::string::npos : sep - begin));
      if (sep == std::string::npos) break;
      begin = sep + 1;
    }
  } else {
    stream += rest;
  }
  std::istringstream in(stream);
  std::ostringstream out;
  LspServerOptions options;
  options.workers = 0;  // deterministic: every analysis in the reading thread
  int code = LspServer(in, out, standInAnalyser, options).serve();
  if (code != 0 && code != 1) fail("exit code", std::to_string(code));
  checkOutput(out.str());
  return 0;
}
