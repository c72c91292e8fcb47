#include "lint/LintReport.h"

#include "edits/EditSet.h"
#include "inputs/Project.h"
#include "Rule.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>

namespace fabricize {

std::string displayPath(const std::string& path) {
  llvm::SmallString<256> cwd;
  if (!llvm::sys::fs::current_path(cwd)) {
    std::string root = absolutePath(std::string(cwd));
    if (path.size() > root.size() + 1 && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/')
      return path.substr(root.size() + 1);
  }
  return path;
}

namespace {

std::string fileUri(const std::string& path) {
  std::string display = displayPath(path);
  if (!display.empty() && display[0] != '/') return display;  // relative: SARIF resolves it against the repo
  std::string uri = "file://";
  for (char c : path) {
    if (std::isalnum(static_cast<unsigned char>(c)) || std::strchr("/-_.~", c)) {
      uri += c;
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
      uri += hex;
    }
  }
  return uri;
}

// GitHub workflow commands: data escapes %, CR, LF; properties also : and ,.
std::string githubEscape(const std::string& s, bool property) {
  std::string out;
  for (char c : s) {
    if (c == '%')
      out += "%25";
    else if (c == '\r')
      out += "%0D";
    else if (c == '\n')
      out += "%0A";
    else if (property && c == ':')
      out += "%3A";
    else if (property && c == ',')
      out += "%2C";
    else
      out += c;
  }
  return out;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n')
      out += "\\n";
    else if (c == '"' || c == '\\')
      out += std::string("\\") + c;
    else
      out += c;
  }
  return out + "\"";
}

}  // namespace

std::string renderLintReport(const std::string& format, const std::vector<ReportedFinding>& reported,
                             const FileText& textOf, const std::vector<std::string>& notAnalysed) {
  std::string report;
  llvm::raw_string_ostream out(report);
  if (format == "text") {
    for (const ReportedFinding& r : reported) {
      const LintFinding& f = r.finding;
      std::string path = displayPath(f.file);
      out << path << ":" << f.line << ":" << f.column << ": warning: " << f.message << " [" << f.ruleId << "]"
          << (r.fixed ? " (fixed)" : "") << "\n";
      std::string source = lineText(textOf(f.file), f.line);
      out << source << "\n";
      std::string caret;
      for (unsigned i = 0; i + 1 < f.column && i < source.size(); ++i) caret += source[i] == '\t' ? '\t' : ' ';
      out << caret << "^\n";
      const std::string& text = textOf(f.file);
      for (const TextEdit& e : f.edits) {
        unsigned endLine, endColumn;
        lineAndColumn(text, e.offset + e.length, endLine, endColumn);
        out << path << ":" << e.line << ":" << e.column << ": note: fix-it: {" << e.line << ":" << e.column << "-"
            << endLine << ":" << endColumn << "}: " << quoted(e.replacement) << "\n";
      }
    }
    if (!reported.empty()) out << reported.size() << (reported.size() == 1 ? " finding" : " findings") << ".\n";
  } else if (format == "github") {
    for (const ReportedFinding& r : reported) {
      const LintFinding& f = r.finding;
      out << "::warning file=" << githubEscape(displayPath(f.file), true) << ",line=" << f.line << ",col=" << f.column
          << ",title=" << githubEscape(f.ruleId, true) << "::" << githubEscape(f.message, false) << "\n";
    }
  } else if (format == "json") {
    nlohmann::json json = {
        {"version", FABRICIZE_VERSION}, {"findings", nlohmann::json::array()}, {"notAnalysed", notAnalysed}};
    for (const ReportedFinding& r : reported) {
      const LintFinding& f = r.finding;
      nlohmann::json fixes = nlohmann::json::array();
      const std::string& text = textOf(f.file);
      for (const TextEdit& e : f.edits) {
        unsigned endLine, endColumn;
        lineAndColumn(text, e.offset + e.length, endLine, endColumn);
        fixes.push_back({{"offset", e.offset},
                         {"length", e.length},
                         {"replacement", e.replacement},
                         {"line", e.line},
                         {"column", e.column},
                         {"endLine", endLine},
                         {"endColumn", endColumn}});
      }
      json["findings"].push_back({{"ruleId", f.ruleId},
                                  {"file", displayPath(f.file)},
                                  {"line", f.line},
                                  {"column", f.column},
                                  {"severity", "warning"},
                                  {"message", f.message},
                                  {"fixes", fixes},
                                  {"fixed", r.fixed}});
    }
    out << json.dump(2) << "\n";
  } else {  // sarif
    nlohmann::json rules = nlohmann::json::array();
    std::map<std::string, size_t> ruleIndex;
    // Only SARIF lists the rules (building the catalogue costs its matchers).
    for (const Rule& rule : buildCatalogue(FabricOptions{})) {
      ruleIndex[rule.id] = rules.size();
      rules.push_back({{"id", rule.id}, {"shortDescription", {{"text", rule.summary}}}});
    }
    nlohmann::json results = nlohmann::json::array();
    for (const ReportedFinding& r : reported) {
      const LintFinding& f = r.finding;
      const std::string& text = textOf(f.file);
      // SARIF columns count UTF-16 code units (the default columnKind), 1-based.
      auto column = [&](unsigned line, unsigned byteColumn) { return utf16Column(text, line, byteColumn) + 1; };
      nlohmann::json location = {{"physicalLocation",
                                  {{"artifactLocation", {{"uri", fileUri(f.file)}}},
                                   {"region", {{"startLine", f.line}, {"startColumn", column(f.line, f.column)}}}}}};
      nlohmann::json result = {
          {"ruleId", f.ruleId}, {"level", "warning"}, {"message", {{"text", f.message}}}, {"locations", {location}}};
      if (ruleIndex.count(f.ruleId)) result["ruleIndex"] = ruleIndex[f.ruleId];
      if (!f.edits.empty()) {
        nlohmann::json replacements = nlohmann::json::array();
        for (const TextEdit& e : f.edits) {
          unsigned endLine, endColumn;
          lineAndColumn(text, e.offset + e.length, endLine, endColumn);
          replacements.push_back({{"deletedRegion",
                                   {{"startLine", e.line},
                                    {"startColumn", column(e.line, e.column)},
                                    {"endLine", endLine},
                                    {"endColumn", column(endLine, endColumn)},
                                    {"charOffset", e.offset},
                                    {"charLength", e.length}}},
                                  {"insertedContent", {{"text", e.replacement}}}});
        }
        result["fixes"] = {{{"description", {{"text", f.message}}},
                            {"artifactChanges",
                             {{{"artifactLocation", {{"uri", fileUri(f.file)}}}, {"replacements", replacements}}}}}};
      }
      results.push_back(result);
    }
    nlohmann::json invocation = {{"executionSuccessful", notAnalysed.empty()}};
    if (!notAnalysed.empty()) {
      nlohmann::json notifications = nlohmann::json::array();
      for (const std::string& f : notAnalysed)
        notifications.push_back(
            {{"level", "error"},
             {"message", {{"text", displayPath(f) + ": does not compile; it was not analysed"}}},
             {"locations", {{{"physicalLocation", {{"artifactLocation", {{"uri", fileUri(f)}}}}}}}}});
      invocation["toolExecutionNotifications"] = notifications;
    }
    nlohmann::json sarif = {
        {"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
        {"version", "2.1.0"},
        {"runs",
         {{{"tool", {{"driver", {{"name", "fabricize"}, {"version", FABRICIZE_VERSION}, {"rules", rules}}}}},
           {"columnKind", "utf16CodeUnits"},
           {"invocations", {invocation}},
           {"results", results}}}}};
    out << sarif.dump(2) << "\n";
  }
  out.flush();
  return report;
}

}  // namespace fabricize
