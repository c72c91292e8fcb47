// fabricize migrate: the default subcommand.
//
//   fabricize [migrate] <sources...> (-o <dir> | -i | --stdout) [options] [-- <compiler flags>]
//
// Exit codes: 0 migrated, 1 migrated with findings a person must read,
// 2 error (nothing written).
#include "migrate/MigrateCommand.h"

#include "inputs/CompileCommands.h"
#include "edits/EditSet.h"
#include "engine/Engine.h"
#include "services/EngineSetup.h"
#include "services/FabricInclude.h"
#include "rule-helpers/Instrumentation.h"
#include "migrate/MigrateInputs.h"
#include "migrate/MigrateOutputs.h"
#include "outputs/Output.h"
#include "Rule.h"

#include "llvm/Support/raw_ostream.h"

#include <fabric/options.h>

#include <map>

namespace fabricize {

namespace {

constexpr int kMigrated = 0, kFindings = 1, kError = 2;

int fail(const std::string& message) {
  llvm::errs() << "fabricize: error: " << message << "\n";
  return kError;
}

const char* kUsage =
    "usage: fabricize [migrate] <sources...> (-o <dir> | -i | --stdout | --diff) [options] [-- <compiler flags>]\n"
    "       fabricize [migrate] --all -p <build dir> (-o <dir> | -i | --diff) [options]\n"
    "fabricize: migrate single-device LibTorch code to fabric::Fabric\n";
const char* kExitCodes = "Exit: 0 migrated, 1 migrated with findings a person must read, 2 error (nothing written).\n";

// The command line, declared: the flags every analysing subcommand shares
// come from addCommonFlags.
void declareOptions(CommandLine& line, MigrateOptions& o) {
  line.option({"-o"}, "dir", o.outputDir, "write the migrated tree under <dir>, mirroring the project root");
  line.flag({"-i"}, o.inPlace, "edit the files in place (atomic replace)");
  line.flag({"--stdout"}, o.toStdout, "print the migrated source of the single input file");
  line.flag({"--diff"}, o.showDiff, "print a unified diff of the migration; write nothing");
  line.flag({"--backup"}, o.backup, "with -i: keep each edited file's original as <file>.orig");
  line.flag({"--comments"}, o.addComments,
            "add a `// fabricize(<rule-id>): ...` comment on each line a person must look at");
  addCommonFlags(line, o.common, kBuildPathFlag | kRootFlag);
  line.flag({"--all"}, o.allSources,
            "migrate every source of the compilation database given with -p (headers they include come along)");
  // The runtime's own lists (runtime/src/options.cpp), which also check the values.
  const auto names = [](const char* option) {
    std::string text;
    for (const std::string& name : fabric::Options::accepted_values(option)) text += (text.empty() ? "" : ", ") + name;
    return text;
  };
  line.option({"--accelerator"}, "name", o.fabric.accelerator,
              "accelerator the emitted Fabric asks for: " + names("accelerator") + " (auto)");
  line.option({"--devices"}, "n", o.fabric.devices, "devices: a count, \"auto\", -1 or a list \"0,2\" (auto)");
  line.option({"--strategy"}, "name", o.fabric.strategy, "strategy: " + names("strategy") + " (ddp)");
  line.option({"--precision"}, "name", o.fabric.precision, "precision: " + names("precision") + " (32-true)");
  line.option({"--num-nodes"}, "n", o.fabric.num_nodes, "number of nodes");
  line.flag({"--emit-cmake"}, o.emitCMake,
            "with -o: write a CMakeLists.txt that builds the migrated sources against find_package(Fabric)");
  line.repeated({"--report"}, "file", o.reportPaths,
                "write a report: JSON (every edit and finding, and a summary), or for a file ending in .md or .html "
                "the migration report a team plans with; may be given more than once");
  line.flag({"--instrument-for-verify"}, o.instrument,
            "instead of migrating, add the records fabricize verify compares (fabric/verify.h) to a copy of "
            "the original program; needs -o");
  line.hideLast();
  line.flag({"--list-rules"}, o.listRules, "list the rule catalogue and exit");
  line.flag({"--quiet"}, o.quiet, "no summary on stderr");
  addCommonFlags(line, o.common,
                 kPchCacheFlag | kPchFlags | kQueryDriverFlags | kJobsFlag | kVerboseFlag | kCompilerFlags);
  line.flag({"--version"}, o.version, "print the version and exit");
  line.positionals(o.sources);
}

// Which outputs and inputs the options name together. An error message, or "".
std::string checkCombinations(const MigrateOptions& o) {
  // Refused now, in the runtime's own words, rather than when the program runs.
  if (std::optional<FabricOptionProblem> problem = checkFabricOptions(o.fabric)) {
    std::string flag = problem->field == "num_nodes" ? "num-nodes" : problem->field;
    return "--" + flag + ": " + problem->message;
  }
  if (o.instrument && o.outputDir.empty()) return "--instrument-for-verify writes a copy: give -o <dir>";
  if (o.listRules) return "";
  if (o.allSources && !o.sources.empty()) return "--all migrates the database's sources: give no source files";
  if (o.allSources && o.common.buildPath.empty())
    return "--all needs -p <build dir> (its compile_commands.json lists the sources)";
  if (!o.allSources && o.sources.empty()) return "no source files given (see --help)";
  if (o.backup && !o.inPlace) return "--backup goes with -i";
  if (!o.outputDir.empty() + o.inPlace + o.toStdout + o.showDiff != 1)
    return "choose exactly one output: -o <dir>, -i, --stdout or --diff";
  if (o.toStdout && (o.allSources || o.sources.size() != 1)) return "--stdout takes exactly one source file";
  if (o.emitCMake && o.outputDir.empty()) return "--emit-cmake needs -o <dir>";
  return "";
}

// `  // fabricize(<id>): <message>` at the end of the finding's line, unless
// the line carries one for that rule already (migrating twice adds nothing).
bool findingComment(const std::string& text, const Finding& finding, TextEdit& out) {
  size_t offset = 0;
  for (unsigned line = 1; line < finding.line && offset != std::string::npos; ++line) {
    offset = text.find('\n', offset);
    if (offset != std::string::npos) ++offset;
  }
  if (offset == std::string::npos) return false;
  size_t end = text.find('\n', offset);
  if (end == std::string::npos) end = text.size();
  if (end > offset && text[end - 1] == '\r') --end;
  std::string marker = "fabricize(" + finding.ruleId + ")";
  if (text.compare(offset, end - offset, text, offset, end - offset) == 0 &&
      text.substr(offset, end - offset).find(marker) != std::string::npos)
    return false;
  out = TextEdit();
  out.offset = static_cast<unsigned>(end);
  out.replacement = "  // " + marker + ": " + finding.message;
  out.ruleId = finding.ruleId;
  out.explanation = "comment for a person";
  out.line = finding.line;
  out.column = static_cast<unsigned>(end - offset + 1);
  out.ruleIndex = ~size_t(0);  // after any other insertion at the same place
  return true;
}

// The sources' edits rendered (merged, the Fabric include where no project
// header brings it), with --comments on the findings' lines; edits two
// rules wrote over each other are findings too.
void renderSources(const MigrateOptions& options, const MigrationInputs& in, EngineResult& result,
                   MigrationOutcome& outcome) {
  std::vector<Finding>& findings = outcome.findings;
  findings = in.findings;
  findings.insert(findings.end(), result.findings.begin(), result.findings.end());
  if (options.addComments)
    for (const Finding& f : findings)
      if (auto file = result.files.find(f.file); file != result.files.end()) {
        TextEdit comment;
        if (findingComment(file->second.original, f, comment)) file->second.edits.push_back(comment);
      }
  outcome.rendered = renderMigration(result.files, in.root);
  for (auto& [path, r] : outcome.rendered)
    for (const EditConflict& c : r.merged.conflicts)
      findings.push_back({c.dropped.ruleId, path, c.dropped.line, c.dropped.column,
                          "edit dropped: it overlaps an edit of " + c.kept.ruleId + "; review this line by hand"});
}

}  // namespace

int runMigrate(int argc, const char** argv) {
  // `fabricize migrate ...` and `fabricize ...` are the same command.
  std::vector<const char*> args(argv, argv + argc);
  if (argc > 1 && std::string(argv[1]) == "migrate") args.erase(args.begin() + 1);
  MigrateOptions options;
  CommandLine line(kUsage, kExitCodes);
  declareOptions(line, options);
  if (std::optional<int> finished = line.parseOrFinish(static_cast<int>(args.size()), args.data(), kMigrated, fail))
    return *finished;
  std::string error;
  if (options.version) {
    llvm::outs() << "fabricize " FABRICIZE_VERSION "\n";
    return kMigrated;
  }
  error = checkCombinations(options);
  if (!error.empty()) return fail(error);
  std::vector<Rule> catalogue = options.instrument ? buildInstrumentation() : buildCatalogue(options.fabric);
  if (options.listRules) {
    for (const Rule& rule : catalogue) llvm::outs() << rule.id << "\t" << rule.step << "\t" << rule.summary << "\n";
    return kMigrated;
  }
  CommonSettings settings;
  if (!resolveCommonFlags(options.common, settings, error)) return fail(error);
  MigrationInputs in;
  if (!resolveMigrationInputs(options, settings, in, error)) return fail(error);

  const CommonFlags& common = options.common;
  EngineOptions engineOptions = engineOptionsFor(in.root, argv[0], !common.noPch, common.extraArgs);
  if (!common.noPch && !common.pchCache.empty()) engineOptions.pch.cacheDir = common.pchCache;
  engineOptions.pch.verbose = common.verbose;
  engineOptions.pch.cacheLimitBytes = settings.pchCacheMiB << 20;
  if (!in.build.buildDir.empty()) engineOptions.pch.projectDirs.push_back(in.build.buildDir);
  engineOptions.editsNeedFabric = !options.instrument;
  engineOptions.jobs = settings.jobs;
  if (!options.quiet && in.files.size() > 1)
    engineOptions.progress = [&in](size_t index, size_t count, const std::string& path) {
      llvm::errs() << "fabricize: [" << index << "/" << count << "] " << relativeTo(path, in.root) << "\n";
    };
  EngineResult result = runRules(catalogue, *in.database, in.files, engineOptions);
  if (!result.failedSources.empty()) {
    for (const std::string& f : result.failedSources)
      reportUnparsed(llvm::errs(), "fabricize: ", f, f, *in.database, "nothing was written");
    return kError;
  }
  // Every input is written under -o, edited or not, so the output tree
  // builds on its own.
  for (const std::string& f : in.files)
    if (!result.files.count(f)) {
      FileResult unchanged;
      if (!readFile(f, unchanged.original)) return fail("cannot read " + f);
      result.files.emplace(f, std::move(unchanged));
    }
  MigrationOutcome outcome;
  renderSources(options, in, result, outcome);
  if (!migrateBuildFiles(options, in, result, outcome, error)) return fail(error);
  if (!writeMigration(options, in, result, outcome, error)) return fail(error);
  printFindings(options, in, outcome);
  if (!writeReports(options, in, result, outcome, error)) return fail(error);
  return outcome.findings.empty() ? kMigrated : kFindings;
}

}  // namespace fabricize
