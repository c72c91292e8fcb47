// fabricize lint: the migrate catalogue as a linter. Every rule match is a
// finding; its edits are the fix-it. Formats: clang-style text, JSON, SARIF
// 2.1.0 and GitHub workflow annotations. Exit 0 clean, 1 findings, 2 when
// anything could not be analysed.
#include "lint/LintCommand.h"

#include "services/CommandLine.h"
#include "inputs/CompileCommands.h"
#include "edits/EditSet.h"
#include "engine/Engine.h"
#include "services/EngineSetup.h"
#include "services/FabricInclude.h"
#include "services/Findings.h"
#include "lint/LintReport.h"
#include "outputs/Output.h"
#include "engine/Pch.h"
#include "inputs/Project.h"
#include "inputs/QueryDriver.h"
#include "Rule.h"
#include "edits/RuleSelection.h"

#include "clang/Tooling/CompilationDatabase.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace fabricize {

namespace {

constexpr int kClean = 0, kFindings = 1, kError = 2;

bool isSourceFile(llvm::StringRef path) {
  llvm::StringRef ext = llvm::sys::path::extension(path);
  return ext == ".cpp" || ext == ".cc" || ext == ".cxx";
}

// Directories are walked for C++ sources, hidden directories skipped, in a
// stable order so reports do not shuffle between runs.
bool collectSources(const std::string& path, std::vector<std::string>& out, std::string& error) {
  if (llvm::sys::fs::is_regular_file(path)) {
    out.push_back(absolutePath(path));
    return true;
  }
  if (!llvm::sys::fs::is_directory(path)) {
    error = path + ": no such file or directory";
    return false;
  }
  std::vector<std::string> found;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(path, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (name.starts_with(".") && it->type() == llvm::sys::fs::file_type::directory_file) {
      it.no_push();
      continue;
    }
    if (isSourceFile(it->path()) && llvm::sys::fs::is_regular_file(it->path()))
      found.push_back(absolutePath(it->path()));
  }
  if (ec) {
    error = path + ": " + ec.message();
    return false;
  }
  std::sort(found.begin(), found.end());
  out.insert(out.end(), found.begin(), found.end());
  return true;
}

const char* kUsage = "usage: fabricize lint <files or directories...> [options] [-- <compiler flags>]\n";
const char* kExitCodes = "Exit: 0 clean, 1 findings, 2 something could not be analysed.\n";

// --select and --ignore as given.
struct SelectionFlags {
  std::vector<std::string> select, ignore;
  bool sawSelect = false, sawIgnore = false;
};

// The findings a person is shown: the rule selection (the command line's,
// else the nearest .fabricize.json), then NOLINT comments. `hidden`: the
// files where some finding was not shown.
bool selectFindings(const EngineResult& result, const SelectionFlags& flags, const FileText& textOf,
                    std::vector<ReportedFinding>& reported, std::set<std::string>& hidden, std::string& error) {
  std::map<std::string, RuleSelection> selectionPerDirectory;  // one config read per directory
  for (LintFinding& finding : findingsOf(result)) {
    std::string dir = llvm::sys::path::parent_path(finding.file).str();
    auto known = selectionPerDirectory.find(dir);
    if (known == selectionPerDirectory.end()) {
      RuleSelection selection;
      if (!selectionFor(finding.file, selection, error)) return false;
      if (flags.sawSelect) selection.select = flags.select;
      if (flags.sawIgnore) selection.ignore = flags.ignore;
      known = selectionPerDirectory.emplace(dir, selection).first;
    }
    if (!known->second.admits(finding.ruleId) || isSuppressed(textOf(finding.file), finding.line, finding.ruleId)) {
      hidden.insert(finding.file);
      continue;
    }
    reported.push_back({std::move(finding), false});
  }

  return true;
}

// --fix: the shown findings' edits, rendered and written as migrate renders
// them (no include where a project header brings it).
bool applyFixes(const EngineResult& result, const std::string& projectRoot, const FileText& textOf,
                const std::set<std::string>& hidden, std::vector<ReportedFinding>& reported, std::string& error) {
  std::map<std::string, std::vector<size_t>> perFile;
  for (size_t i = 0; i < reported.size(); ++i)
    if (!reported[i].finding.edits.empty()) perFile[reported[i].finding.file].push_back(i);
  // Rendered as migrate renders: no include where a header brings it.
  std::map<std::string, FileResult> toFix;
  for (auto& [path, indices] : perFile) {
    FileResult& fixed = toFix[path];
    fixed.original = textOf(path);
    for (size_t i : indices)
      fixed.edits.insert(fixed.edits.end(), reported[i].finding.edits.begin(), reported[i].finding.edits.end());
    auto file = result.files.find(path);
    fixed.wantsInclude = file != result.files.end() && file->second.wantsInclude && !hidden.count(path);
  }
  std::map<std::string, RenderedFile> rendered = renderMigration(toFix, projectRoot);
  for (auto& [path, indices] : perFile) {
    const RenderedFile& fixed = rendered.at(path);
    const std::vector<EditConflict>& conflicts = fixed.merged.conflicts;
    std::string problem = writeFileAtomically(path, fixed.text);
    if (!problem.empty()) {
      error = problem;
      return false;
    }
    for (size_t i : indices) {
      bool dropped = false;
      for (const EditConflict& c : conflicts)
        dropped =
            dropped || (c.dropped.ruleId == reported[i].finding.ruleId && c.dropped.line == reported[i].finding.line);
      reported[i].fixed = !dropped;
    }
    for (const EditConflict& c : conflicts)
      llvm::errs() << displayPath(path) << ":" << c.dropped.line << ":" << c.dropped.column
                   << ": warning: fix-it not applied: it overlaps a fix-it of " << c.kept.ruleId << " ["
                   << c.dropped.ruleId << "]\n";
  }
  return true;
}

}  // namespace

int runLint(int argc, const char** argv) {
  std::vector<std::string> paths;
  std::string format = "text", outputFile;
  bool fix = false;
  SelectionFlags selectionFlags;
  CommonFlags common;
  auto fail = [](const std::string& message) {
    llvm::errs() << "fabricize lint: error: " << message << "\n";
    return kError;
  };
  CommandLine line(kUsage, kExitCodes);
  addCommonFlags(line, common, kBuildPathFlag,
                 {"build folder holding compile_commands.json (no paths: lint all it lists)"});
  line.option({"--format"}, "f", format, "text (default), json, sarif, github");
  line.option({"--output-file"}, "f", outputFile, "write the report to <f> instead of stdout");
  line.list({"--select"}, "ids", selectionFlags.select, "only these rules (comma list of ids or prefixes)",
            &selectionFlags.sawSelect);
  line.list({"--ignore"}, "ids", selectionFlags.ignore, "not these rules (comma list of ids or prefixes)",
            &selectionFlags.sawIgnore);
  line.flag({"--fix"}, fix, "apply the fix-its of the reported findings in place");
  addCommonFlags(line, common, kRootFlag | kPchFlags | kQueryDriverFlags | kJobsFlag | kVerboseFlag | kCompilerFlags,
                 {"", "", "translation units analysed at once (default: the machine's cores)",
                  "say which files were skipped or analysed"});
  line.positionals(paths);
  if (std::optional<int> finished = line.parseOrFinish(argc, argv, kClean, fail)) return *finished;
  std::string error;
  CommonSettings settings;
  if (!resolveCommonFlags(common, settings, error)) return fail(error);
  for (auto [option, patterns] :
       {std::pair{"--select", &selectionFlags.select}, std::pair{"--ignore", &selectionFlags.ignore}}) {
    std::string problem = unknownPatternError(*patterns, catalogueIds(), option);
    if (!problem.empty()) return fail(problem);
  }
  if (format != "text" && format != "json" && format != "sarif" && format != "github")
    return fail("unknown --format '" + format + "' (text, json, sarif, github)");
  const std::string& buildPath = common.buildPath;
  const bool verbose = common.verbose, sawDashDash = common.sawDashDash;

  std::unique_ptr<clang::tooling::CompilationDatabase> database =
      explicitDatabase(sawDashDash, common.compilerFlags, buildPath, settings.query, error);
  if (!error.empty()) return fail(error);

  std::vector<std::string> files;
  for (const std::string& p : paths)
    if (!collectSources(p, files, error)) return fail(error);
  if (paths.empty() && database && !buildPath.empty())
    for (const std::string& f : database->getAllFiles())
      if (isSourceFile(f)) files.push_back(absolutePath(f));
  if (files.empty()) {
    if (paths.empty()) return fail("no files or directories given (see --help)");
    if (verbose) llvm::errs() << "fabricize lint: no C++ sources under the given paths\n";
    return kClean;
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  if (!database) database = databaseFor(files.front(), settings.query);

  // Fast path: a file naming nothing the rules look for cannot match.
  std::vector<std::string> toAnalyse, notInDatabase;
  for (const std::string& f : files) {
    if (!buildPath.empty() && !sawDashDash && database->getCompileCommands(f).empty()) {
      llvm::errs() << "fabricize lint: error: " << displayPath(f) << ": no compile command in " << buildPath
                   << "/compile_commands.json; it was not analysed\n";
      notInDatabase.push_back(f);
      continue;
    }
    std::string text;
    if (!readFile(f, text)) return fail(f + ": cannot read");
    if (mayMatchAnyRule(text))
      toAnalyse.push_back(f);
    else if (verbose)
      llvm::errs() << "fabricize lint: " << displayPath(f) << ": skipped (no rule's trigger token)\n";
  }
  if (verbose)
    for (const std::string& f : toAnalyse) llvm::errs() << "fabricize lint: " << displayPath(f) << ": analysing\n";

  // The root: given, else the build's project (widened to the files linted),
  // else the files' common folder.
  std::string projectRoot = common.root.empty() ? commonDirectory(files) : absolutePath(common.root);
  BuildTree build;
  if (common.root.empty() && !buildPath.empty() && !sawDashDash) {
    build = readBuildTree(buildPath);
    std::string buildRoot = projectRootOf(build, *database);
    projectRoot = commonFolder({buildRoot, projectRoot});
  }
  EngineResult result;
  if (!toAnalyse.empty()) {
    EngineOptions options = engineOptionsFor(projectRoot, argv[0], !common.noPch, common.extraArgs);
    options.jobs = settings.jobs;
    options.pch.cacheLimitBytes = settings.pchCacheMiB << 20;
    if (!build.buildDir.empty()) options.pch.projectDirs.push_back(build.buildDir);

    result = runRules(buildCatalogue(FabricOptions{}), *database, toAnalyse, options);
  }
  result.failedSources.insert(result.failedSources.end(), notInDatabase.begin(), notInDatabase.end());
  for (const std::string& f : result.failedSources)
    if (std::find(notInDatabase.begin(), notInDatabase.end(), f) == notInDatabase.end())
      reportUnparsed(llvm::errs(), "fabricize lint: ", displayPath(f), f, *database, "it was not analysed");

  std::map<std::string, std::string> texts;
  auto textOf = [&](const std::string& path) -> const std::string& {
    auto it = texts.find(path);
    if (it != texts.end()) return it->second;
    std::string text;
    auto file = result.files.find(path);
    if (file != result.files.end())
      text = file->second.original;
    else
      readFile(path, text);
    return texts[path] = text;
  };
  std::vector<ReportedFinding> reported;
  std::set<std::string> filesWithHiddenFindings;
  if (!selectFindings(result, selectionFlags, textOf, reported, filesWithHiddenFindings, error)) return fail(error);
  if (fix && !applyFixes(result, projectRoot, textOf, filesWithHiddenFindings, reported, error)) return fail(error);

  std::string report = renderLintReport(format, reported, textOf, result.failedSources);
  if (outputFile.empty()) {
    llvm::outs() << report;
  } else {
    std::string problem = writeFileAtomically(outputFile, report);
    if (!problem.empty()) return fail(problem);
  }

  if (!result.failedSources.empty() || !notInDatabase.empty()) return kError;
  bool remaining = std::any_of(reported.begin(), reported.end(), [](const ReportedFinding& r) { return !r.fixed; });
  return remaining ? kFindings : kClean;
}

}  // namespace fabricize
