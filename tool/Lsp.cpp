// fabricize lsp: a Language Server over stdio. Each open document is
// analysed with the migrate catalogue on open, change and save; findings are
// published as diagnostics (code = rule id) and offered as quick fixes whose
// edits are the rule's own, plus one source action that migrates the file.
//
// The engine parses files from disk, so the in-memory text is analysed as a
// copy in a temporary directory, compiled with the original file's command
// and able to find the original's neighbouring headers (-iquote).
#include "Lint.h"

#include "Output.h"
#include "Rule.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdio>
#include <iostream>
#include <algorithm>
#include <map>
#include <optional>

namespace fabricize {

namespace {

using nlohmann::json;

// JSON-RPC and LSP error codes.
constexpr int kParseError = -32700, kInvalidRequest = -32600, kMethodNotFound = -32601,
              kInvalidParams = -32602, kServerNotInitialized = -32002;

// The original file's compile command, pointed at the in-memory copy.
class CopyDatabase : public clang::tooling::CompilationDatabase {
 public:
  CopyDatabase(std::unique_ptr<clang::tooling::CompilationDatabase> inner, std::string original,
               std::string copy)
      : inner_(std::move(inner)), original_(std::move(original)), copy_(std::move(copy)) {}
  std::vector<clang::tooling::CompileCommand> getCompileCommands(llvm::StringRef) const override {
    std::vector<clang::tooling::CompileCommand> commands = inner_->getCompileCommands(original_);
    for (auto& command : commands) {
      for (std::string& arg : command.CommandLine) {
        llvm::SmallString<256> resolved(arg);
        if (!llvm::sys::path::is_absolute(resolved)) {
          resolved = command.Directory;
          llvm::sys::path::append(resolved, arg);
        }
        if (arg == command.Filename || absolutePath(std::string(resolved)) == original_) arg = copy_;
      }
      command.Filename = copy_;
      // Quoted includes still find the original's neighbours. Right after the
      // compiler, so that it lands before any `--`.
      command.CommandLine.insert(std::min(command.CommandLine.begin() + 1, command.CommandLine.end()),
                                 {"-iquote", llvm::sys::path::parent_path(original_).str()});
    }
    return commands;
  }

 private:
  std::unique_ptr<clang::tooling::CompilationDatabase> inner_;
  std::string original_, copy_;
};

std::string pathFromUri(const std::string& uri) {
  if (uri.compare(0, 7, "file://") != 0) return "";
  std::string path;
  for (size_t i = 7; i < uri.size(); ++i) {
    if (uri[i] == '%' && i + 2 < uri.size() && std::isxdigit(static_cast<unsigned char>(uri[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(uri[i + 2]))) {
      path += static_cast<char>(std::stoi(uri.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      path += uri[i];
    }
  }
  return path;
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
  return {{"line", line}, {"character", utf16Column(text, line + 1, offset - lineStart + 1)}};
}

unsigned offsetOf(const std::string& text, unsigned line, unsigned column) {
  size_t at = 0;
  for (unsigned l = 1; l < line; ++l) {
    at = text.find('\n', at);
    if (at == std::string::npos) return text.size();
    ++at;
  }
  return std::min<size_t>(at + column - 1, text.size());
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

struct Document {
  std::string uri, path, text;
  std::vector<LintFinding> findings;  // offsets into `text`
  std::vector<TextEdit> migrateEdits;  // the whole-file migration, merged
  bool parsed = true;
  RuleSelection selection;  // from .fabricize.json
  std::string configError;
};

class Server {
 public:
  explicit Server(const char* argv0) : argv0_(argv0) {}

  // Returns the process exit code once `exit` arrives or stdin closes.
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
      json params = message.value("params", json::object());
      if (method == "exit") return shutdown_ ? 0 : 1;
      try {
        json result;
        std::optional<json> failure = handle(method, params, result, isRequest);
        if (isRequest) {
          if (failure) reply(id, *failure);
          else send({{"jsonrpc", "2.0"}, {"id", id}, {"result", result}});
        }
      } catch (const json::exception& e) {
        if (isRequest) reply(id, error(kInvalidParams, std::string("invalid params: ") + e.what()));
        else llvm::errs() << "fabricize lsp: ignored " << method << ": " << e.what() << "\n";
      }
    }
    return shutdown_ ? 0 : 1;
  }

 private:
  static json error(int code, const std::string& message) { return {{"code", code}, {"message", message}}; }

  void reply(const json& id, const json& errorObject) {
    send({{"jsonrpc", "2.0"}, {"id", id}, {"error", errorObject}});
  }

  void send(const json& message) {
    std::string body = message.dump(-1, ' ', false, json::error_handler_t::replace);
    std::cout << "Content-Length: " << body.size() << "\r\n\r\n" << body;
    std::cout.flush();
  }

  // Content-Length framing; other headers are ignored. False at end of input.
  bool readMessage(std::string& body) {
    for (;;) {
      long length = -1;
      std::string line;
      bool sawHeader = false;
      while (std::getline(std::cin, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) {
          if (sawHeader) break;
          continue;
        }
        sawHeader = true;
        std::string lower = line;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (lower.compare(0, 15, "content-length:") == 0) {
          try {
            length = std::stol(line.substr(15));
          } catch (const std::exception&) {
            length = -1;
          }
        }
      }
      if (!std::cin) return false;
      if (length < 0 || length > (1L << 30)) {
        reply(nullptr, error(kParseError, "missing or invalid Content-Length header"));
        continue;
      }
      body.assign(static_cast<size_t>(length), '\0');
      std::cin.read(body.data(), length);
      return static_cast<bool>(std::cin);
    }
  }

  std::optional<json> handle(const std::string& method, const json& params, json& result, bool isRequest) {
    if (method == "initialize") {
      initialized_ = true;
      result = {{"capabilities",
                 {{"textDocumentSync", {{"openClose", true}, {"change", 1}, {"save", {{"includeText", true}}}}},
                  {"codeActionProvider",
                   {{"codeActionKinds", {"quickfix", "source.fabricize.migrate"}}}}}},
                {"serverInfo", {{"name", "fabricize"}, {"version", FABRICIZE_VERSION}}}};
      return std::nullopt;
    }
    if (!initialized_) {
      if (isRequest) return error(kServerNotInitialized, "initialize first");
      return std::nullopt;
    }
    if (shutdown_ && isRequest) return error(kInvalidRequest, "the server is shutting down");
    if (method == "initialized" || method.compare(0, 2, "$/") == 0) return std::nullopt;
    if (method == "shutdown") {
      shutdown_ = true;
      result = nullptr;
      return std::nullopt;
    }
    if (method == "textDocument/didOpen") {
      const json& item = params.at("textDocument");
      Document& doc = documents_[item.at("uri").get<std::string>()];
      doc.uri = item.at("uri");
      doc.path = pathFromUri(doc.uri);
      doc.text = item.at("text");
      analyseAndPublish(doc);
      return std::nullopt;
    }
    if (method == "textDocument/didChange" || method == "textDocument/didSave") {
      auto it = documents_.find(params.at("textDocument").at("uri").get<std::string>());
      if (it == documents_.end()) return std::nullopt;
      if (method == "textDocument/didChange") {
        // Full sync: the last change holds the whole text.
        const json& changes = params.at("contentChanges");
        if (!changes.empty()) it->second.text = changes.back().at("text");
      } else if (params.contains("text")) {
        it->second.text = params["text"];
      }
      analyseAndPublish(it->second);
      return std::nullopt;
    }
    if (method == "textDocument/didClose") {
      std::string uri = params.at("textDocument").at("uri");
      documents_.erase(uri);
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

  void analyseAndPublish(Document& doc) {
    analyse(doc);
    json diagnostics = json::array();
    if (!doc.parsed)
      diagnostics.push_back({{"range", {{"start", {{"line", 0}, {"character", 0}}}, {"end", {{"line", 0}, {"character", 0}}}}},
                             {"severity", 1},
                             {"source", "fabricize"},
                             {"code", "parse-error"},
                             {"message", "fabricize: this file does not compile with its compile command, so it "
                                         "was not checked for Fabric migrations (see the server log)"}});
    if (!doc.configError.empty())
      diagnostics.push_back({{"range", {{"start", {{"line", 0}, {"character", 0}}}, {"end", {{"line", 0}, {"character", 0}}}}},
                             {"severity", 1},
                             {"source", "fabricize"},
                             {"code", "config-error"},
                             {"message", "fabricize: " + doc.configError + " (ignored: every rule applies)"}});
    for (const LintFinding& f : doc.findings) diagnostics.push_back(diagnosticOf(doc, f));
    send({{"jsonrpc", "2.0"},
          {"method", "textDocument/publishDiagnostics"},
          {"params", {{"uri", doc.uri}, {"diagnostics", diagnostics}}}});
  }

  static json diagnosticOf(const Document& doc, const LintFinding& f) {
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

  void analyse(Document& doc) {
    doc.findings.clear();
    doc.migrateEdits.clear();
    doc.parsed = true;
    doc.configError.clear();
    if (doc.path.empty() || !mayMatchAnyRule(doc.text)) return;
    // The lint's .fabricize.json applies in the editor too; a broken one is shown.
    if (!selectionFor(doc.path, doc.selection, doc.configError)) doc.selection = RuleSelection{};

    llvm::SmallString<128> dir;
    if (llvm::sys::fs::createUniqueDirectory("fabricize-lsp", dir)) {
      llvm::errs() << "fabricize lsp: cannot create a temporary directory\n";
      doc.parsed = false;
      return;
    }
    std::string tempDir = absolutePath(std::string(dir));
    std::string copy = tempDir + "/" + llvm::sys::path::filename(doc.path).str();
    std::string problem = writeFileAtomically(copy, doc.text);
    if (problem.empty()) {
      CopyDatabase database(databaseFor(doc.path), absolutePath(doc.path), copy);
      EngineOptions options = engineOptionsFor(tempDir, argv0_);
      EngineResult result = runRules(catalogue_, database, {copy}, options);
      if (!result.failedSources.empty()) {
        doc.parsed = false;
      } else {
        for (LintFinding& f : findingsOf(result))
          if (f.file == copy && doc.selection.admits(f.ruleId) && !isSuppressed(doc.text, f.line, f.ruleId)) {
            f.file = doc.path;
            doc.findings.push_back(std::move(f));
          }
        auto file = result.files.find(copy);
        if (file != result.files.end())
          renderFixed(doc.text, file->second.edits, file->second.wantsInclude, nullptr, &doc.migrateEdits);
      }
    } else {
      llvm::errs() << "fabricize lsp: " << problem << "\n";
      doc.parsed = false;
    }
    llvm::sys::fs::remove_directories(tempDir);
  }

  json codeActions(const json& params) {
    json actions = json::array();
    auto it = documents_.find(params.at("textDocument").at("uri").get<std::string>());
    if (it == documents_.end()) return actions;
    const Document& doc = it->second;
    unsigned firstLine = params.at("range").at("start").at("line");
    unsigned lastLine = params.at("range").at("end").at("line");
    std::vector<std::string> only;
    if (params.contains("context") && params["context"].contains("only"))
      only = params["context"]["only"].get<std::vector<std::string>>();
    auto wanted = [&](const std::string& kind) {
      if (only.empty()) return true;
      for (const std::string& k : only)
        if (kind == k || kind.compare(0, k.size() + 1, k + ".") == 0) return true;
      return false;
    };
    if (wanted("quickfix"))
      for (const LintFinding& f : doc.findings) {
        if (f.edits.empty() || f.line - 1 < firstLine || f.line - 1 > lastLine) continue;
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

  const char* argv0_;
  std::vector<Rule> catalogue_ = buildCatalogue(FabricOptions{});
  std::map<std::string, Document> documents_;
  bool initialized_ = false, shutdown_ = false;
};

}  // namespace

int runLsp(int argc, const char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      llvm::outs() << "usage: fabricize lsp\n  A Language Server on stdin/stdout (JSON-RPC, Content-Length framed).\n"
                      "  Diagnostics and quick fixes from the migrate rules; see docs/lsp.md.\n";
      return 0;
    }
    if (arg != "--stdio") {  // editors commonly pass --stdio
      llvm::errs() << "fabricize lsp: error: unknown option '" << arg << "'\n";
      return 2;
    }
  }
  std::ios::sync_with_stdio(false);
  Server server(argv[0]);
  return server.serve();
}

}  // namespace fabricize
