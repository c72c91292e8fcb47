// fabricize lint's report of its findings: clang-style text, GitHub
// workflow annotations, JSON and SARIF 2.1.0. Part of the lint front end
// (LintCommand.cpp).
#pragma once

#include "edits/LintFinding.h"

#include <functional>
#include <string>
#include <vector>

namespace fabricize {

// A finding as the report shows it: whether --fix applied its fix-it.
struct ReportedFinding {
  LintFinding finding;
  bool fixed = false;
};

// The text of a file as the findings' lines and columns count it.
using FileText = std::function<const std::string&(const std::string& path)>;

// The report in `format` (text, github, json, sarif); `notAnalysed`: the
// sources that did not parse.
std::string renderLintReport(const std::string& format, const std::vector<ReportedFinding>& reported,
                             const FileText& textOf, const std::vector<std::string>& notAnalysed);

// `path` relative to the working folder when it is under it.
std::string displayPath(const std::string& path);

}  // namespace fabricize
