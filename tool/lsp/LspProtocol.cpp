#include "lsp/LspProtocol.h"

#include <algorithm>
#include <cctype>

namespace fabricize {

using nlohmann::json;

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

std::string pathFromUri(const std::string& uri) {
  if (uri.compare(0, 7, "file://") != 0) return "";
  auto hexValue = [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(c) - 'a' + 10;
  };
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

json diagnosticOf(const LspDocument& doc, const LintFinding& f) {
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

void appendCodeActions(const LspDocument& doc, unsigned firstLine, unsigned lastLine,
                       const std::function<bool(const std::string&)>& wanted, json& actions) {
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
}

}  // namespace fabricize
