// The migration report a team lead plans with: per file and per rule, what
// fabricize migrated automatically, what needs a person (with the findings),
// what it did not understand, the share of training constructs migrated
// automatically, where the Fabric was threaded, and each file's change with
// its code before and after. Rendered as Markdown or
// HTML (`fabricize ... --report plan.md` / `--report plan.html`); the JSON
// report carries the same summary.
#pragma once

#include <map>
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

// Where one training loop's batches come from after the migration (issue
// 37): a line of the report's "Data sharded" section.
struct DataLoopEntry {
  enum Status {
    Sharded,      // the data is split across ranks (a Fabric loader, shard_range, shard_elements, a loader class)
    PerRank,      // the loop draws its batches, each rank its own
    NeedsPerson,  // every rank would read all of it: fabric-own-dataloader says what to do
    NotData,      // nothing per step to split
  };
  Status status = NotData;
  std::string file;  // relative to the project root
  unsigned line = 0;
  std::string text;
};

struct MigrationReportData {
  std::string root;
  std::vector<std::string> files;  // every file read, relative to the root
  std::vector<ReportEntry> entries;
  std::vector<DataLoopEntry> dataLoops;  // one per training loop
  // Each migrated file's change, code before and after: its unified diff
  // (3 lines of context), by file relative to the root.
  std::map<std::string, std::string> changes;
};

// A data-loop line from fabric-data-loop's note: its text says the status
// ("sharded: ...", "per rank: ...", "needs a person: ...", "not a data
// loop: ..."), and a loop over a loader class of the project's own
// ("loader class `X`: ...") is sharded when fabric-shard-loader-class
// sharded that class anywhere in the project (`shardedLoaderClasses`).
DataLoopEntry dataLoopOf(const std::string& file, unsigned line, const std::string& note,
                         const std::vector<std::string>& shardedLoaderClasses);
// The class name in fabric-shard-loader-class's explanation ("loader class
// `X`: ...", "class `X`: ..." for one that draws at random), or "".
std::string loaderClassNamed(const std::string& explanation);

// Which kind a finding is: not understood (code inside a macro, a source
// the run could not take, an internal error), else it needs a person.
ReportEntry::Kind findingKind(const std::string& ruleId, const std::string& message);

struct ReportSummary {
  size_t automatic = 0, needsPerson = 0, notUnderstood = 0;
  // Training loops by where their data comes from (DataLoopEntry::Status).
  size_t loops = 0, loopsSharded = 0, loopsPerRank = 0, loopsNeedPerson = 0, loopsNotData = 0;
  // Automatic over all three, in percent; 100 when there is nothing to do.
  double automaticShare() const;
};
ReportSummary summarize(const MigrationReportData& data);

std::string renderMarkdownReport(const MigrationReportData& data);
std::string renderHtmlReport(const MigrationReportData& data);

}  // namespace fabricize
