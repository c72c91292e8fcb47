// fabricize verify, its checks: what the three runs of the harness
// (VerifyHarness.h) must show for the migration to be equivalent, each
// check with its verdict, the details and the source lines most likely
// responsible; and the verdict printed and written. Part of the verify
// front end (VerifyCommand.cpp).
#pragma once

#include "VerifyHarness.h"

#include <string>
#include <vector>

namespace fabricize {

struct Check {
  std::string id, title;
  std::string verdict = "pass";  // pass, fail, not run
  std::vector<std::string> details;
  std::vector<std::string> where;  // file:line of the construct most likely responsible
};

// Every check on `runs`; `migratedTree`: the migrated sources, where the
// lines responsible for a difference are looked for.
std::vector<Check> checkRuns(const VerifyOptions& options, const VerifyRuns& runs, const std::string& migratedTree);

// Prints the checks and writes --report (JSON, and Markdown beside it).
// Returns kEquivalent or kDifferences; kCannot with `error` when the report
// cannot be written.
int reportVerdict(const VerifyOptions& options, const std::vector<Check>& checks, const VerifyRuns& runs,
                  std::string& error);

}  // namespace fabricize
