#include "LspServer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <optional>

namespace fabricize {

namespace {

using nlohmann::json;

// JSON-RPC and LSP error codes.
constexpr int kParseError = -32700, kInvalidRequest = -32600, kMethodNotFound = -32601,
              kInvalidParams = -32602, kServerNotInitialized = -32002;

// Thrown for params of the wrong shape; answered with kInvalidParams.
struct InvalidParams : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A line or character number: a non-negative integer. (A float or a
// negative number would otherwise be converted with undefined behaviour.)
unsigned positionField(const json& object, const char* key) {
  const json& value = object.at(key);
  if (!value.is_number_integer() || value.get<long long>() < 0 || value.get<long long>() > 0x7fffffff)
    throw InvalidParams(std::string("'") + key + "' must be a non-negative integer");
  return value.get<unsigned>();
}

std::string stringField(const json& object, const char* key) {
  const json& value = object.at(key);
  if (!value.is_string()) throw InvalidParams(std::string("'") + key + "' must be a string");
  return value.get<std::string>();
}

// LSP position (0-based line, UTF-16 character) of a byte offset.
json positionAt(const std::string& text, unsigned offset) {
  unsigned line = 0;
  size_t lineStart = 0;
  for (size_t i = 0; i < offset && i < text.size(); ++i)
    if (text[i] == '\n') {
      ++line;
      lineStart = i + 1;
    }
  size_t column = std::min<size_t>(offset, text.size()) - lineStart;
  return {{"line", line}, {"character", utf16Column(text, line + 1, static_cast<unsigned>(column + 1))}};
}

// Byte offset of a 1-based line and byte column, clamped to the text.
unsigned offsetOf(const std::string& text, unsigned line, unsigned column) {
  size_t at = 0;
  for (unsigned l = 1; l < line; ++l) {
    at = text.find('\n', at);
    if (at == std::string::npos) return static_cast<unsigned>(text.size());
    ++at;
  }
  return static_cast<unsigned>(std::min<size_t>(at + std::max(column, 1u) - 1, text.size()));
}

// Insertions at one offset become one edit: clients differ in how they
// order several inserts at a position.
json lspEdits(const std::string& text, const std::vector<TextEdit>& sortedEdits) {
  std::vector<TextEdit> edits;
  for (const TextEdit& e : sortedEdits) {
    if (!edits.empty() && edits.back().length == 0 && edits.back().offset == e.offset) {
      edits.back().replacement += e.replacement;
      edits.back().length = e.length;
    } else {
      edits.push_back(e);
    }
  }
  json out = json::array();
  for (const TextEdit& e : edits)
    out.push_back({{"range", {{"start", positionAt(text, e.offset)}, {"end", positionAt(text, e.offset + e.length)}}},
                   {"newText", e.replacement}});
  return out;
}

json fileLevelDiagnostic(const char* code, const std::string& message) {
  return {{"range", {{"start", {{"line", 0}, {"character", 0}}}, {"end", {{"line", 0}, {"character", 0}}}}},
          {"severity", 1},
          {"source", "fabricize"},
          {"code", code},
          {"message", message}};
}

}  // namespace

std::string pathFromUri(const std::string& uri) {
  if (uri.compare(0, 7, "file://") != 0) return "";
  auto hexValue = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(c) - 'a' + 10; };
  std::string path;
  for (size_t i = 7; i < uri.size(); ++i) {
    if (uri[i] == '%' && i + 2 < uri.size() && std::isxdigit(static_cast<unsigned char>(uri[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(uri[i + 2]))) {
      path += static_cast<char>(hexValue(uri[i + 1]) * 16 + hexValue(uri[i + 2]));
      i += 2;
    } else {
      path += uri[i];
    }
  }
  // A NUL would end the path early wherever it is handed to the OS.
  if (path.find('\0') != std::string::npos) return "";
  return path;
}

struct LspServer::State {
  std::istream& in;
  std::ostream& out;
  LspAnalyser analyse_;
  std::map<std::string, LspDocument> documents;
  bool initialized = false, shutdown = false;

  static json error(int code, const std::string& message) { return {{"code", code}, {"message", message}}; }

  void reply(const json& id, const json& errorObject) {
    send({{"jsonrpc", "2.0"}, {"id", id}, {"error", errorObject}});
  }

  void send(const json& message) {
    // Source text may hold bytes that are not UTF-8: replaced, never thrown.
    std::string body = message.dump(-1, ' ', false, json::error_handler_t::replace);
    out << "Content-Length: " << body.size() << "\r\n\r\n" << body;
    out.flush();
  }

  // Content-Length framing; other headers are ignored. False at end of input.
  bool readMessage(std::string& body) {
    for (;;) {
      long long length = -1;
      bool sawHeader = false, badLength = false;
      std::string line;
      while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) {
          if (sawHeader) break;
          continue;
        }
        sawHeader = true;
        std::string lower = line.substr(0, 15);
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (lower == "content-length:") {
          std::string digits = line.substr(15);
          digits.erase(0, digits.find_first_not_of(" \t"));
          digits.erase(digits.find_last_not_of(" \t") + 1);
          if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos)
            badLength = true;
          else
            length = std::stoll(digits);
        }
      }
      if (!in) return false;
      if (badLength || length < 0) {
        reply(nullptr, error(kParseError, "missing or invalid Content-Length header"));
        continue;
      }
      // Read what arrives rather than reserving what the header claims.
      body.clear();
      bool tooLarge = static_cast<unsigned long long>(length) > kMaxLspMessageBytes;
      char chunk[1 << 16];
      for (long long left = length; left > 0;) {
        std::streamsize want = static_cast<std::streamsize>(std::min<long long>(left, sizeof chunk));
        in.read(chunk, want);
        if (in.gcount() != want) return false;
        if (!tooLarge) body.append(chunk, static_cast<size_t>(want));
        left -= want;
      }
      if (tooLarge) {
        reply(nullptr, error(kParseError, "message of " + std::to_string(length) + " bytes is larger than the " +
                                              std::to_string(kMaxLspMessageBytes) + " the server accepts"));
        continue;
      }
      return true;
    }
  }

  int serve() {
    std::string body;
    while (readMessage(body)) {
      json message;
      try {
        message = json::parse(body);
      } catch (const json::exception& e) {
        reply(nullptr, error(kParseError, std::string("parse error: ") + e.what()));
        continue;
      }
      if (!message.is_object() || !message.contains("method") || !message["method"].is_string()) {
        if (message.is_object() && message.contains("result")) continue;  // a response to us: none expected
        json id = message.is_object() && message.contains("id") ? message["id"] : json(nullptr);
        reply(id, error(kInvalidRequest, "not a JSON-RPC request: no method"));
        continue;
      }
      std::string method = message["method"];
      bool isRequest = message.contains("id");
      json id = isRequest ? message["id"] : json(nullptr);
      if (isRequest && !id.is_string() && !id.is_number_integer() && !id.is_null()) {
        reply(nullptr, error(kInvalidRequest, "a request id is a string or an integer"));
        continue;
      }
      json params = message.value("params", json::object());
      if (method == "exit") return shutdown ? 0 : 1;
      try {
        json result;
        std::optional<json> failure = handle(method, params, result, isRequest);
        if (isRequest) {
          if (failure) reply(id, *failure);
          else send({{"jsonrpc", "2.0"}, {"id", id}, {"result", result}});
        }
      } catch (const std::exception& e) {  // json's type and key errors, InvalidParams
        if (isRequest) reply(id, error(kInvalidParams, std::string("invalid params: ") + e.what()));
        else std::cerr << "fabricize lsp: ignored " << method << ": " << e.what() << "\n";
      }
      settle(/*whenIdle=*/true);
    }
    settle(/*whenIdle=*/false);
    return shutdown ? 0 : 1;
  }

  // Whether the client has sent more than this server has read: typing in
  // progress. (A pipe's unread bytes, through the stream buffer.)
  bool inputPending() { return in.rdbuf()->in_avail() > 0; }

  // Analyses what changed and publishes it once the client has stopped
  // sending: a burst of edits (keystrokes that arrive while the server is
  // busy) makes one analysis of the last text, not one per keystroke. The
  // result is published with the version it is for, even if newer edits
  // arrived meanwhile (they get the next analysis): while someone types
  // steadily the diagnostics lag behind, they never stop. `whenIdle` false:
  // now, whatever is pending (end of input).
  void settle(bool whenIdle) {
    for (auto& [uri, doc] : documents) {
      if (whenIdle && inputPending()) return;
      if (!doc.stale) continue;
      analyse(doc);
      publish(doc);
    }
  }

  std::optional<json> handle(const std::string& method, const json& params, json& result, bool isRequest) {
    if (method == "initialize") {
      initialized = true;
      result = {{"capabilities",
                 {{"textDocumentSync", {{"openClose", true}, {"change", 1}, {"save", {{"includeText", true}}}}},
                  {"codeActionProvider",
                   {{"codeActionKinds", {"quickfix", "source.fabricize.migrate"}}}}}},
                {"serverInfo", {{"name", "fabricize"}, {"version", FABRICIZE_VERSION}}}};
      return std::nullopt;
    }
    if (!initialized) {
      if (isRequest) return error(kServerNotInitialized, "initialize first");
      return std::nullopt;
    }
    if (shutdown && isRequest) return error(kInvalidRequest, "the server is shutting down");
    if (method == "initialized" || method.compare(0, 2, "$/") == 0) return std::nullopt;
    if (method == "shutdown") {
      shutdown = true;
      result = nullptr;
      return std::nullopt;
    }
    if (!params.is_object()) throw InvalidParams("params must be an object");
    if (method == "textDocument/didOpen") {
      const json& item = params.at("textDocument");
      std::string uri = stringField(item, "uri"), text = stringField(item, "text");
      LspDocument& doc = documents[uri];
      doc.uri = uri;
      doc.path = pathFromUri(uri);
      doc.text = std::move(text);
      doc.version = item.contains("version") && item["version"].is_number_integer() ? item["version"].get<long long>() : -1;
      doc.stale = true;
      return std::nullopt;
    }
    if (method == "textDocument/didChange" || method == "textDocument/didSave") {
      auto it = documents.find(stringField(params.at("textDocument"), "uri"));
      if (it == documents.end()) return std::nullopt;
      if (method == "textDocument/didChange") {
        // Full sync: the last change holds the whole text.
        const json& changes = params.at("contentChanges");
        if (!changes.is_array()) throw InvalidParams("'contentChanges' must be an array");
        if (!changes.empty()) it->second.text = stringField(changes.back(), "text");
        const json& item = params.at("textDocument");
        it->second.version =
            item.contains("version") && item["version"].is_number_integer() ? item["version"].get<long long>() : -1;
      } else if (params.contains("text")) {
        it->second.text = stringField(params, "text");
      }
      it->second.stale = true;
      return std::nullopt;
    }
    if (method == "textDocument/didClose") {
      std::string uri = stringField(params.at("textDocument"), "uri");
      documents.erase(uri);
      send({{"jsonrpc", "2.0"},
            {"method", "textDocument/publishDiagnostics"},
            {"params", {{"uri", uri}, {"diagnostics", json::array()}}}});
      return std::nullopt;
    }
    if (method == "textDocument/codeAction") {
      result = codeActions(params);
      return std::nullopt;
    }
    if (isRequest) return error(kMethodNotFound, "method not found: " + method);
    return std::nullopt;  // unknown notifications are ignored, as the protocol asks
  }

  void analyse(LspDocument& doc) {
    doc.findings.clear();
    doc.migrateEdits.clear();
    doc.parsed = true;
    doc.configError.clear();
    doc.openBuffers.clear();
    for (const auto& [uri, open] : documents)
      if (!open.path.empty()) doc.openBuffers[open.path] = open.text;
    analyse_(doc);
    doc.openBuffers.clear();
    doc.stale = false;
  }

  void publish(LspDocument& doc) {
    json diagnostics = json::array();
    if (!doc.parsed)
      diagnostics.push_back(fileLevelDiagnostic(
          "parse-error", "fabricize: this file does not compile with its compile command, so it "
                         "was not checked for Fabric migrations (see the server log)"));
    if (!doc.configError.empty())
      diagnostics.push_back(
          fileLevelDiagnostic("config-error", "fabricize: " + doc.configError + " (ignored: every rule applies)"));
    for (const LintFinding& f : doc.findings) diagnostics.push_back(diagnosticOf(doc, f));
    json published = {{"uri", doc.uri}, {"diagnostics", diagnostics}};
    // The version analysed: a client can tell which text the diagnostics are for.
    if (doc.version >= 0) published["version"] = doc.version;
    send({{"jsonrpc", "2.0"}, {"method", "textDocument/publishDiagnostics"}, {"params", published}});
  }

  static json diagnosticOf(const LspDocument& doc, const LintFinding& f) {
    unsigned begin = offsetOf(doc.text, f.line, f.column), end = begin;
    while (end < doc.text.size() && (std::isalnum(static_cast<unsigned char>(doc.text[end])) || doc.text[end] == '_'))
      ++end;
    if (end == begin && end < doc.text.size() && doc.text[end] != '\n') ++end;
    return {{"range", {{"start", positionAt(doc.text, begin)}, {"end", positionAt(doc.text, end)}}},
            {"severity", 2},
            {"source", "fabricize"},
            {"code", f.ruleId},
            {"message", f.message}};
  }

  json codeActions(const json& params) {
    json actions = json::array();
    auto it = documents.find(stringField(params.at("textDocument"), "uri"));
    if (it == documents.end()) return actions;
    // Fixes for the text the client has, never for an older one.
    if (it->second.stale) {
      analyse(it->second);
      publish(it->second);
    }
    const LspDocument& doc = it->second;
    unsigned firstLine = positionField(params.at("range").at("start"), "line");
    unsigned lastLine = positionField(params.at("range").at("end"), "line");
    std::vector<std::string> only;
    if (params.contains("context") && params["context"].is_object() && params["context"].contains("only"))
      only = params["context"]["only"].get<std::vector<std::string>>();
    auto wanted = [&](const std::string& kind) {
      if (only.empty()) return true;
      for (const std::string& k : only)
        if (kind == k || kind.compare(0, k.size() + 1, k + ".") == 0) return true;
      return false;
    };
    if (wanted("quickfix"))
      for (const LintFinding& f : doc.findings) {
        if (f.edits.empty() || f.line == 0 || f.line - 1 < firstLine || f.line - 1 > lastLine) continue;
        // The rule's edits, merged the way migrate merges them (a removed
        // statement takes its line with it).
        MergedEdits merged = mergeEdits(doc.text, f.edits);
        matchLineEndings(doc.text, merged.edits);
        actions.push_back({{"title", "Fabric: " + f.message + " [" + f.ruleId + "]"},
                           {"kind", "quickfix"},
                           {"isPreferred", true},
                           {"diagnostics", {diagnosticOf(doc, f)}},
                           {"edit", {{"changes", {{doc.uri, lspEdits(doc.text, merged.edits)}}}}}});
      }
    if (wanted("source.fabricize.migrate") && !doc.migrateEdits.empty())
      actions.push_back({{"title", "Migrate this file to Fabric"},
                         {"kind", "source.fabricize.migrate"},
                         {"edit", {{"changes", {{doc.uri, lspEdits(doc.text, doc.migrateEdits)}}}}}});
    return actions;
  }
};

LspServer::LspServer(std::istream& in, std::ostream& out, LspAnalyser analyse)
    : state_(new State{in, out, std::move(analyse), {}, false, false}) {}

LspServer::~LspServer() = default;

int LspServer::serve() { return state_->serve(); }

}  // namespace fabricize
