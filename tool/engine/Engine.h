// Runs the rule catalogue over translation units and gathers, per file, the
// edits and the findings (diagnostics a person must read).
#pragma once

#include "edits/EditSet.h"
#include "engine/EngineOptions.h"
#include "engine/Preamble.h"
#include "Rule.h"

#include "clang/Tooling/CompilationDatabase.h"

#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace fabricize {

struct Finding {
  std::string ruleId;
  std::string file;
  unsigned line = 0, column = 0;
  std::string message;
  // An error: training code left without the Fabric (the migrated program
  // would train unsynchronised copies); a warning: a person should look.
  bool error = false;
};

// One match of one rule: where it matched, why, and the edits that fix it
// (none for a report-only match). Lint and the IDE show these; migrate
// applies the edits of all of them, merged per file (FileResult).
struct RuleMatch {
  std::string ruleId;
  std::string file;
  unsigned line = 0, column = 0;
  std::string explanation;
  std::vector<TextEdit> edits;  // offsets into `file`
  bool reportOnly = false;      // a finding for a person, nothing to apply
  // Not applied: the edits need the Fabric in a function that cannot get
  // it (the explanation then says why); edits is empty.
  bool notMigrated = false;
};

// A Note rule's match (RuleKind::Note): a fact the migration report shows,
// such as where a training loop's data comes from. Never a finding.
struct Note {
  std::string ruleId;
  std::string file;
  unsigned line = 0, column = 0;
  std::string text;
};

struct FileResult {
  std::string original;         // the file's text as parsed
  std::vector<TextEdit> edits;  // unmerged, as the rules produced them
  bool wantsInclude = false;    // a rule asked for <fabric/fabric.h>
};

struct EngineResult {
  std::map<std::string, FileResult> files;  // absolute path -> edits
  std::vector<Finding> findings;            // report-only matches, macro skips, internal errors
  std::vector<RuleMatch> matches;           // every match, each once even when seen from several TUs
  std::vector<Note> notes;                  // Note rules' matches, each once
  std::vector<std::string> failedSources;   // did not parse: nothing may be written
  std::set<std::string> projectFiles;       // every file under the root a TU read (sources, headers)
  bool cancelled = false;                   // stopped by EngineOptions::cancelled: nothing else is complete
  PreambleReport preamble;                  // of the last source parsed with EngineOptions::preambles
};

EngineResult runRules(const std::vector<Rule>& catalogue, const clang::tooling::CompilationDatabase& database,
                      const std::vector<std::string>& sources, const EngineOptions& options);

}  // namespace fabricize
