// Runs the rule catalogue over translation units and gathers, per file, the
// edits and the findings (diagnostics a person must read).
#pragma once

#include "EditSet.h"
#include "Pch.h"
#include "Preamble.h"
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

struct FileResult {
  std::string original;       // the file's text as parsed
  std::vector<TextEdit> edits;  // unmerged, as the rules produced them
  bool wantsInclude = false;  // a rule asked for <fabric/fabric.h>
};

struct EngineOptions {
  std::string projectRoot;                 // absolute; nothing outside it is edited
  std::vector<std::string> extraArguments;  // appended to every compile command
  std::string resourceDir;                 // Clang's builtin headers
  PchOptions pch;                          // a cached LibTorch PCH; empty cacheDir: none
  unsigned jobs = 1;                       // translation units parsed at once
  // Absolute path -> text parsed instead of the file on disk (an editor's
  // unsaved buffers: the document and the headers open beside it).
  std::map<std::string, std::string> unsavedFiles;
  // Called before each translation unit starts: (1-based index, count, path).
  std::function<void(size_t, size_t, const std::string&)> progress;
  // Whether edits in a function need the Fabric there (the catalogue's);
  // false for rules that never call it (verify's instrumentation).
  bool editsNeedFabric = true;
  // Set by another thread to stop early (an editor's text went stale): the
  // parse stops at the next declaration or function body, nothing is matched
  // and the result says `cancelled`.
  const std::atomic<bool>* cancelled = nullptr;
  // Set: each source's own preamble (its includes, chained on the LibTorch
  // PCH) is kept here and reused while edits leave the includes alone (the
  // language server's; Preamble.h).
  PreambleCache* preambles = nullptr;
  // False: a parse with the PCH that fails on errors in the user's own files
  // is not tried again without it (they are the text's errors: an editor's
  // text mid-edit). True: retried, so that the errors are printed in full
  // and a PCH at fault is ruled out (migrate, lint).
  bool retryWithoutPch = true;
};

struct EngineResult {
  std::map<std::string, FileResult> files;  // absolute path -> edits
  std::vector<Finding> findings;  // report-only matches, macro skips, internal errors
  std::vector<RuleMatch> matches;  // every match, each once even when seen from several TUs
  std::vector<std::string> failedSources;   // did not parse: nothing may be written
  std::set<std::string> projectFiles;       // every file under the root a TU read (sources, headers)
  bool cancelled = false;                   // stopped by EngineOptions::cancelled: nothing else is complete
  PreambleReport preamble;  // of the last source parsed with EngineOptions::preambles
};

EngineResult runRules(const std::vector<Rule>& catalogue,
                      const clang::tooling::CompilationDatabase& database,
                      const std::vector<std::string>& sources, const EngineOptions& options);

}  // namespace fabricize
