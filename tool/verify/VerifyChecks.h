// fabricize verify, its checks: what the three runs of the harness
// (VerifyHarness.h) must show for the migration to be equivalent, each
// check with its verdict, the details and the source lines most likely
// responsible; and the verdict printed and written. Part of the verify
// front end (VerifyCommand.cpp).
#pragma once

#include "verify/VerifyHarness.h"

#include <string>
#include <vector>

namespace fabricize {

struct Check {
  std::string id, title;
  std::string verdict = "pass";  // pass, fail, not run
  std::vector<std::string> details;
  std::vector<std::string> where;  // file:line of the construct most likely responsible
};

// A metric a program prints: a number right after a word naming a loss or
// an accuracy (`loss 0.12`, `val_acc: 0.9`).
struct Metric {
  std::string word;
  double value;
};
std::vector<Metric> metricsOf(const std::string& line);
// The line with its numbers replaced by `#`: lines of one shape are one
// series (an epoch's line, printed once per epoch).
std::string shapeOf(const std::string& line);

// Every check on `runs`; `migratedTree`: the migrated sources, where the
// lines responsible for a difference are looked for.
std::vector<Check> checkRuns(const VerifyOptions& options, const VerifyRuns& runs, const std::string& migratedTree);

}  // namespace fabricize
