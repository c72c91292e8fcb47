// fabricize verify: proves a migration by running both programs.
//
//   fabricize verify <source.cpp> [options] [-- <compiler flags>]
//   fabricize verify -p <build dir> [--target NAME] [options]
//
// In a scratch folder (--work) it writes two programs with fabricize itself:
// the original instrumented (`--instrument-for-verify`: a fixed seed first in
// main, a record at each backward and optimizer step, see
// runtime/include/fabric/verify.h) and the migration (or the migrated tree
// given with --migrated, a migration made or edited by hand), builds both
// against the Fabric package, runs the original, the migration on 1 process
// and on 2, and compares (VerifyChecks below). Exit codes: 0 equivalent,
// 1 differences found, 2 could not build or run.
#include "verify/VerifyCommand.h"

#include "services/CommandLine.h"
#include "verify/VerifyChecks.h"
#include "verify/VerifyHarness.h"
#include "verify/VerifyReport.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <sstream>

namespace fabricize {

namespace {

int cannot(const std::string& message) {
  llvm::errs() << "fabricize verify: error: " << message << "\n";
  return kCannot;
}

// Parses the command line; an exit code when verify ends there.
std::optional<int> parseOptions(int argc, const char** argv, VerifyOptions& o) {
  CommandLine line(
      "usage: fabricize verify <source.cpp>... [options] [-- <compiler flags>]\n"
      "       fabricize verify -p <build dir> [--target NAME] [options]\n",
      "Exit: 0 equivalent, 1 differences found, 2 could not build or run.\n");
  CommonFlags common;
  addCommonFlags(line, common, kBuildPathFlag | kCompilerFlags,
                 {"build folder holding compile_commands.json: verify the project it builds"});
  line.option({"--target"}, "NAME", o.target, "the executable to run, where the project builds several");
  line.option(
      {"--args"}, "arguments",
      [&o](const std::string& text) {
        std::istringstream in(text);
        o.programArgs.clear();
        for (std::string word; in >> word;) o.programArgs.push_back(word);
        return std::string();
      },
      "the program's arguments (split at spaces)");
  line.number({"--steps"}, "N", o.steps, "optimizer steps each run makes (default 40)");
  line.option({"--migrated"}, "dir", o.migrated, "verify this migrated tree (a CMake project) instead of migrating");
  line.option({"--work"}, "dir", o.work, "scratch folder (default: a new folder under the temp folder)");
  line.repeated({"--cmake-arg"}, "flag", o.cmakeArgs,
                "a flag for CMake when it configures the original and the migration (repeatable), as the project's "
                "own build was configured (-DDOWNLOAD_MNIST=OFF)");
  line.option({"--inputs"}, "dir", o.inputs,
              "what the program reads by relative path (./data): each run's folder links to every entry of "
              "this folder (links: a program that writes into them changes them for the runs after it)");
  line.option({"--report"}, "file.json", o.report,
              "the verdicts as JSON, and beside it a Markdown summary (.md), the loss curves (.svg) and one page with "
              "the curves, the metrics and the verdicts (.html); a name ending in .html or .md names the same set");
  line.number({"--timeout"}, "S", o.timeout, "seconds each run may take (default 300)");
  line.option({"--accelerator"}, "cpu|cuda", o.accelerator,
              "the device both programs run on (LT_ACCELERATOR; default: theirs)");
  line.option({"--fabric-dir"}, "dir", o.fabricDir, "the Fabric CMake package (default: the one beside fabricize)");
  line.number({"--loss-tolerance"}, "R", o.lossTolerance,
              "relative band of the 2-rank loss around the original's (0.5)");
  line.number({"--metric-tolerance"}, "R", o.metricTolerance, "relative difference of losses printed (0.35)");
  line.number({"--accuracy-tolerance"}, "A", o.accuracyTolerance,
              "difference of accuracies printed (0.05, at least 10% of the value)");
  line.positionals(o.sources);
  if (std::optional<int> finished = line.parseOrFinish(argc, argv, kEquivalent, cannot)) return finished;
  o.buildPath = common.buildPath;
  o.compilerFlags = common.compilerFlags;
  o.sawDashDash = common.sawDashDash;
  if (o.sources.empty() == o.buildPath.empty())
    return cannot("give either source files or -p <build dir>\n" + line.help());
  if (!o.inputs.empty() && !llvm::sys::fs::is_directory(o.inputs))
    return cannot("--inputs " + o.inputs +
                  ": not a folder (give the folder whose entries the program reads by "
                  "relative path, as ./data)");
  if (o.steps == 0) return cannot("--steps must be at least 1");
  return std::nullopt;
}

}  // namespace

int runVerify(int argc, const char** argv) {
  VerifyOptions options;
  if (std::optional<int> finished = parseOptions(argc, argv, options)) return *finished;
  std::string error;
  VerifyPrograms programs;
  if (!buildPrograms(options, argv[0], programs, error)) return cannot(error);
  VerifyRuns runs;
  if (!runPrograms(options, programs, runs, error)) return cannot(error);
  std::vector<Check> checks = checkRuns(options, runs, programs.migratedTree);
  int verdict = reportVerdict(options, checks, runs, error);
  return verdict == kCannot ? cannot(error) : verdict;
}

}  // namespace fabricize
