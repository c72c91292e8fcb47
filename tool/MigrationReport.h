// The migration report a team lead plans with: per file and per rule, what
// fabricize migrated automatically, what needs a person (with the findings),
// what it did not understand, the share of training constructs migrated
// automatically, and where the Fabric was threaded. Rendered as Markdown or
// HTML (`fabricize ... --report plan.md` / `--report plan.html`); the JSON
// report carries the same summary.
#pragma once

#include <string>
#include <vector>

namespace fabricize {

struct ReportEntry {
  enum Kind { Automatic, NeedsPerson, NotUnderstood };
  Kind kind = Automatic;
  std::string ruleId;
  std::string file;  // relative to the project root
  unsigned line = 0;
  std::string text;  // the rule's explanation, or the finding's message
  bool error = false;
};

struct MigrationReportData {
  std::string root;
  std::vector<std::string> files;  // every file read, relative to the root
  std::vector<ReportEntry> entries;
};

// Which kind a finding is: not understood (code inside a macro, a source
// the run could not take, an internal error), else it needs a person.
ReportEntry::Kind findingKind(const std::string& ruleId, const std::string& message);

struct ReportSummary {
  size_t automatic = 0, needsPerson = 0, notUnderstood = 0;
  // Automatic over all three, in percent; 100 when there is nothing to do.
  double automaticShare() const;
};
ReportSummary summarize(const MigrationReportData& data);

std::string renderMarkdownReport(const MigrationReportData& data);
std::string renderHtmlReport(const MigrationReportData& data);

}  // namespace fabricize
