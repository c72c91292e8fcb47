// fabricize verify, its harness: the two programs written by fabricize
// (the original instrumented, the migration), built against the Fabric
// package, and run (the original, the migration on 1 and on 2 processes),
// each run's console, records and files kept for the checks
// (VerifyChecks.h). Part of the verify front end (VerifyCommand.cpp).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fabricize {

inline constexpr int kEquivalent = 0, kDifferences = 1, kCannot = 2;

struct VerifyOptions {
  std::vector<std::string> sources;
  std::string buildPath, target, migrated, work, report, fabricDir, accelerator;
  std::string inputs;  // --inputs: a folder whose entries each run's folder links to
  std::vector<std::string> programArgs, compilerFlags;
  std::vector<std::string> cmakeArgs;  // --cmake-arg: added to both projects' configure commands
  bool sawDashDash = false;
  unsigned steps = 40, timeout = 300;
  double lossTolerance = 0.5, metricTolerance = 0.35, accuracyTolerance = 0.05;
};

// A process run to its end (or its time limit).
struct Run {
  int exitCode = 0;
  bool timedOut = false;
  double seconds = 0;
  std::string out, err;
};

// What the runtime recorded for one rank (runtime/include/fabric/verify.h).
struct Record {
  bool present = false;
  long pid = 0;
  int rank = 0;
  std::vector<std::string> lossText;  // %a: exact
  std::vector<double> losses;
  std::vector<std::string> steps;  // parameter hashes
  std::vector<long long> offsets;  // stdout's size at each step
  std::string end;
  std::string strategy;  // as the runtime resolved it (migrated programs)
  // Each data share the runtime handed this rank (`share <site> <total>
  // <mine>`): a loop site or a loader, how many items a pass has in all,
  // and how many of them this rank got (fabric.shard_range, a Fabric loader).
  struct Share {
    std::string site;
    long long total = 0, mine = 0;
  };
  std::vector<Share> shares;
};

// The programs, built.
struct VerifyPrograms {
  std::string original, migrated;  // executables
  std::string migratedTree;        // the migrated sources (written, or --migrated)
  std::string preload;             // libfabric_verify_files.so
};

// The three runs and what they left.
struct VerifyRuns {
  Run original, one, two;
  std::vector<Record> originalRecord, oneRecord, twoRecords;
  nlohmann::json migrationFindings = nlohmann::json::array();   // the migration's report
  nlohmann::json migrationDataLoops = nlohmann::json::array();  // its training loops, where their data comes from
  std::string recordsFolder;
};

// Finds the Fabric package and the preload library, makes the work folder,
// writes and builds both programs. False with `error` (exit kCannot).
bool buildPrograms(VerifyOptions& options, const char* argv0, VerifyPrograms& programs, std::string& error);

// Runs the original, then the migration on 1 and on 2 processes. False
// with `error` when the original itself does not run to an optimizer step.
bool runPrograms(const VerifyOptions& options, const VerifyPrograms& programs, VerifyRuns& runs, std::string& error);

// --- shared with the checks ---
std::string contentsOf(const std::string& path);
std::vector<std::string> lines(const std::string& text);
std::string tail(const std::string& text, size_t count);
std::string joined(const std::vector<std::string>& items, const std::string& separator = ", ");
// How a run ended: "exited with code 1 (rank 0 after step 3, ...)".
std::string runStory(const Run& run, const std::vector<Record>& records);
// The files under `folder`, relative to it, sorted.
std::vector<std::string> filesIn(const std::string& folder);

}  // namespace fabricize
