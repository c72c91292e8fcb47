#include "services/Findings.h"

#include "outputs/Output.h"
#include "Rule.h"
#include "utilities/StableOrder.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <tuple>

namespace fabricize {

std::vector<LintFinding> findingsOf(const EngineResult& result) {
  std::vector<LintFinding> all;
  for (const RuleMatch& m : result.matches) all.push_back({m.ruleId, m.file, m.line, m.column, m.explanation, m.edits});
  for (const Finding& f : result.findings) {
    bool isMatch = false;
    for (const RuleMatch& m : result.matches)
      isMatch = isMatch || (m.ruleId == f.ruleId && m.file == f.file && m.line == f.line && m.column == f.column);
    if (!isMatch) all.push_back({f.ruleId, f.file, f.line, f.column, f.message, {}});
  }
  stableSort(all, [](const LintFinding& a, const LintFinding& b) {
    return std::tie(a.file, a.line, a.column, a.ruleId) < std::tie(b.file, b.line, b.column, b.ruleId);
  });
  return all;
}

bool selectionFor(const std::string& file, RuleSelection& out, std::string& error) {
  out = RuleSelection{};
  std::string dir = llvm::sys::path::parent_path(file).str();
  while (!dir.empty()) {
    std::string candidate = dir + "/.fabricize.json";
    if (llvm::sys::fs::exists(candidate)) {
      std::string text;
      if (!readFile(candidate, text)) {
        error = candidate + ": cannot read";
        return false;
      }
      return parseRuleSelection(text, candidate, catalogueIds(), out, error);
    }
    std::string parent = llvm::sys::path::parent_path(dir).str();
    if (parent == dir) break;
    dir = parent;
  }
  return true;
}

std::vector<std::string> catalogueIds() {
  std::vector<std::string> ids;
  for (const Rule& rule : buildCatalogue(FabricOptions{})) ids.push_back(rule.id);
  return ids;
}

bool mayMatchAnyRule(const std::string& text) {
  // The names the catalogue's matchers look for (rewrite-rules/*.cpp). Kept
  // here until Rule carries its own trigger names; a rule matching a name not
  // listed would be missed in files that mention none of these.
  static const std::set<std::string> triggers = {"backward",
                                                 "to",
                                                 "save",
                                                 "load",
                                                 "cout",
                                                 "printf",
                                                 "main",
                                                 "launch",
                                                 "setup",
                                                 "parameters",
                                                 "named_parameters",
                                                 "make_data_loader",
                                                 "data_parallel",
                                                 "device",
                                                 "Device",
                                                 "DeviceType",
                                                 "is_available",
                                                 "Fabric",
                                                 "fabric",
                                                 "shuffle",
                                                 "randperm",
                                                 "iota"};
  for (size_t i = 0; i < text.size();) {
    unsigned char c = text[i];
    if (!(std::isalpha(c) || c == '_')) {
      ++i;
      continue;
    }
    size_t start = i;
    while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
    std::string word = text.substr(start, i - start);
    if (triggers.count(word)) return true;
    std::string lower = word;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    // kCUDA, cudaSetDevice, cudaStream_t; allreduce, MPI_Allreduce.
    if (lower.find("cuda") != std::string::npos || lower.find("allreduce") != std::string::npos) return true;
  }
  return false;
}

}  // namespace fabricize
