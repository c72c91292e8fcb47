// The Language Server Protocol's side of fabricize's data: LSP positions
// (UTF-16) of byte offsets, text edits, diagnostics of findings, code
// actions of a document's fixes. Pure conversions, no state: the server
// (LspServer.cpp) dispatches, this file spells.
#pragma once

#include "edits/EditSet.h"
#include "edits/LintFinding.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace fabricize {

// An open document as the server analyses it.
struct LspDocument {
  std::string uri, path, text;  // path: from a file:// uri, else empty (not analysed)
  // Every open document's path -> text (this one's included), set by the
  // server before each analysis: headers edited in the editor are parsed as
  // the editor holds them.
  std::map<std::string, std::string> openBuffers;
  // Filled by the analyser:
  std::vector<LintFinding> findings;   // line/column into `text`
  std::vector<TextEdit> migrateEdits;  // the whole-file migration, merged
  bool parsed = true;                  // false: the text does not compile
  std::string configError;             // a .fabricize.json that could not be used
  bool cancelled = false;              // the analysis stopped early: nothing above is complete
  std::string analysisNote;            // how it was analysed, for --log=info ("preamble reused")
  long long version = -1;              // the client's version of `text` (-1: none given)
};

// JSON-RPC and LSP error codes.
constexpr int kParseError = -32700, kInvalidRequest = -32600, kMethodNotFound = -32601, kInvalidParams = -32602,
              kServerNotInitialized = -32002;

// Thrown for params of the wrong shape; answered with kInvalidParams.
struct InvalidParams : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A line or character number: a non-negative integer. (A float or a
// negative number would otherwise be converted with undefined behaviour.)
unsigned positionField(const nlohmann::json& object, const char* key);
// A string member; InvalidParams otherwise.
std::string stringField(const nlohmann::json& object, const char* key);

// LSP position (0-based line, UTF-16 character) of a byte offset.
nlohmann::json positionAt(const std::string& text, unsigned offset);
// Byte offset of a 1-based line and byte column, clamped to the text.
unsigned offsetOf(const std::string& text, unsigned line, unsigned column);
// LSP text edits of sorted edits; insertions at one offset become one edit
// (clients differ in how they order several inserts at a position).
nlohmann::json lspEdits(const std::string& text, const std::vector<TextEdit>& sortedEdits);

// A diagnostic on the first character of the file (parse or config error).
nlohmann::json fileLevelDiagnostic(const char* code, const std::string& message);
// The diagnostic of a finding: the identifier it points at, a warning.
nlohmann::json diagnosticOf(const LspDocument& doc, const LintFinding& finding);

// The document's quick fixes for findings on lines [firstLine, lastLine]
// (0-based) and its "migrate this file" action, those `wanted` admits.
void appendCodeActions(const LspDocument& doc, unsigned firstLine, unsigned lastLine,
                       const std::function<bool(const std::string&)>& wanted, nlohmann::json& actions);

// "file:///a%20b.cpp" -> "/a b.cpp"; empty for other schemes.
std::string pathFromUri(const std::string& uri);

}  // namespace fabricize
