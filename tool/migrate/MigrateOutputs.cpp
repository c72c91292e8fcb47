#include "migrate/MigrateOutputs.h"

#include "edits/BuildFiles.h"
#include "inputs/CMakeFileApi.h"
#include "edits/Diff.h"
#include "edits/EditSet.h"
#include "edits/MigrationReport.h"
#include "outputs/Output.h"
#include "outputs/ProjectCopy.h"
#include "utilities/StableOrder.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>

namespace fabricize {

namespace {

std::string cmakeFor(const std::vector<std::string>& relativeSources) {
  std::string target = llvm::sys::path::stem(relativeSources.front()).str();
  std::string text =
      "# Written by fabricize --emit-cmake: builds the migrated program against the Fabric runtime.\n"
      "cmake_minimum_required(VERSION 3.18)\n"
      "project(" +
      target +
      "_fabric CXX)\n"
      "set(CMAKE_CXX_STANDARD 17)\n"
      "set(CMAKE_CXX_STANDARD_REQUIRED ON)\n"
      "find_package(Fabric CONFIG REQUIRED)\n"
      "add_executable(" +
      target;
  for (const std::string& s : relativeSources) text += " " + s;
  text += ")\ntarget_link_libraries(" + target + " PRIVATE Fabric::fabric)\n";
  return text;
}

// Where LibTorch is linked, as CMake evaluated it (its File API), so a link
// list in a variable or a function gets the runtime too; none: where the
// CMake text spells LibTorch.
std::optional<LibTorchLinks> libTorchLinks(const MigrateOptions& options, const MigrationInputs& in) {
  if (in.buildFiles.empty() || in.build.cmakeSourceDir.empty()) return std::nullopt;
  std::string why;
  std::optional<CodeModel> model = readCodeModel(in.build, why, options.common.verbose);
  if (!model) {
    if (!options.quiet)
      llvm::errs() << "fabricize: CMake's codemodel is not available (" << why
                   << "): Fabric::fabric is linked where the CMake files name LibTorch\n";
    return std::nullopt;
  }
  LibTorchLinks links;
  links.libTorchTargets = model->libTorchTargets.size();
  // Targets whose sources are all outside the root are not migrated: they
  // need no runtime.
  for (const CodeModel::LibTorchLink& link : model->libTorchLinks)
    if (std::any_of(link.sources.begin(), link.sources.end(),
                    [&](const std::string& s) { return isUnderOrEqual(s, in.root); }))
      links.sites.push_back({link.file, link.line, link.targets, link.onlyExecutables});
  return links;
}

// -o's copy of what the migration does not write itself (ProjectCopy.h),
// once the migrated files are in place.
bool copyRestOfProject(const MigrateOptions& options, const MigrationInputs& in,
                       const std::vector<std::pair<std::string, std::string>>& pending, std::string& error) {
  // A root that is a home folder or the file system's (loose files migrated
  // one by one) is nobody's project: only what the migration wrote.
  const char* home = std::getenv("HOME");
  if (in.root == "/" || (home != nullptr && in.root == absolutePath(home))) {
    if (!options.quiet)
      llvm::errs() << "fabricize: the project root " << in.root
                   << " is not a project folder: only the sources and their headers were written to " << in.outRoot
                   << " (give --root <project folder> for a complete copy)\n";
    return true;
  }
  ProjectCopyRequest request;
  request.root = in.root;
  request.outRoot = in.outRoot;
  for (const auto& [target, text] : pending)
    if (isUnderOrEqual(target, in.outRoot)) request.written.insert(in.root + "/" + relativeTo(target, in.outRoot));
  if (!in.build.buildDir.empty() && isUnderOrEqual(absolutePath(in.build.buildDir), in.root))
    request.buildFolders.push_back(absolutePath(in.build.buildDir));
  ProjectCopySummary summary;
  if (!copyProject(request, summary, error)) {
    error = "-o " + options.outputDir + ": " + error +
            " (the migrated files were written; the rest of the project was not copied completely)";
    return false;
  }
  if (std::string line = describeProjectCopy(summary, in.outRoot); !options.quiet && !line.empty())
    llvm::errs() << line << "\n";
  return true;
}

// Every file of the run goes to a temporary file first (a read-only folder
// or a full disk fails there), then all are renamed into place.
bool writeFiles(const MigrateOptions& options, const MigrationInputs& in, const EngineResult& result,
                const MigrationOutcome& outcome, std::string& error) {
  const auto& rendered = outcome.rendered;
  // Every backup before any edit, and none when one would be overwritten:
  // a refusal leaves the tree as it was.
  std::vector<std::pair<std::string, std::string>> pending;
  if (options.backup) {
    for (const auto& [path, r] : rendered)
      if (!r.merged.edits.empty() && llvm::sys::fs::exists(path + ".orig")) {
        error = path + ".orig exists: move it away, or run without --backup";
        return false;
      }
    for (const auto& [path, r] : rendered)
      if (!r.merged.edits.empty()) pending.emplace_back(path + ".orig", result.files.at(path).original);
  }
  for (const auto& [path, r] : rendered) {
    if (r.merged.edits.empty()) continue;
    pending.emplace_back(options.inPlace ? path : in.outRoot + "/" + relativeTo(path, in.root), r.text);
  }
  // -o mirrors the project: the inputs, the project headers they read and
  // the build files, edited or not, so the output tree builds on its own.
  if (!options.inPlace) {
    std::set<std::string> mirrored(in.files.begin(), in.files.end());
    for (const std::string& path : result.projectFiles)
      if (!in.generated(path)) mirrored.insert(path);
    mirrored.insert(in.buildFiles.begin(), in.buildFiles.end());
    mirrored.insert(in.configureFiles.begin(), in.configureFiles.end());
    for (const std::string& path : mirrored) {
      if (auto r = rendered.find(path); r != rendered.end() && !r->second.merged.edits.empty()) continue;
      std::string text;
      if (!readFile(path, text)) {
        error = "cannot read " + path;
        return false;
      }
      pending.emplace_back(in.outRoot + "/" + relativeTo(path, in.root), text);
    }
  }
  if (options.emitCMake) {
    std::vector<std::string> relativeSources;
    for (const std::string& f : in.files) relativeSources.push_back(relativeTo(f, in.root));
    pending.emplace_back(in.outRoot + "/CMakeLists.txt", cmakeFor(relativeSources));
  }
  error = writeFilesAtomically(pending);
  if (!error.empty()) return false;
  // -o is a copy of the whole project: the files beside the sources (a
  // class list, configurations, scripts, data) too, so that the migrated
  // program runs from out/ as the original ran from its folder. After the
  // migrated files: a folder -o cannot write to fails there first, with
  // nothing written.
  return options.inPlace || copyRestOfProject(options, in, pending, error);
}

}  // namespace

bool migrateBuildFiles(const MigrateOptions& options, const MigrationInputs& in, EngineResult& result,
                       MigrationOutcome& outcome, std::string& error) {
  // Edited as text, all of the project's at once (Torch found at the top,
  // linked in subdirectories), reported like the sources.
  std::vector<std::string> texts(in.buildFiles.size());
  for (size_t i = 0; i < in.buildFiles.size(); ++i)
    if (!readFile(in.buildFiles[i], texts[i])) {
      error = "cannot read " + in.buildFiles[i];
      return false;
    }
  std::optional<LibTorchLinks> links = libTorchLinks(options, in);
  std::vector<BuildFileMigration> migrations = migrateCMakeProject(in.buildFiles, texts, links ? &*links : nullptr);
  for (size_t i = 0; i < in.buildFiles.size(); ++i) {
    const std::string& path = in.buildFiles[i];
    FileResult buildFile;
    buildFile.original = std::move(texts[i]);
    for (const BuildFileMigration::Note& note : migrations[i].notes)
      outcome.findings.push_back({kCMakeRuleId, path, note.line, 1, note.message});
    RenderedFile r;
    r.merged = mergeEdits(buildFile.original, migrations[i].edits);
    matchLineEndings(buildFile.original, r.merged.edits);
    r.text = applyEdits(buildFile.original, r.merged.edits);
    result.files[path] = std::move(buildFile);
    outcome.rendered[path] = std::move(r);
  }
  // A header the build generates (under its build folder) is not the
  // project's to edit: the migrated tree's build generates it again.
  for (auto it = outcome.rendered.begin(); it != outcome.rendered.end();) {
    if (!in.generated(it->first)) {
      ++it;
      continue;
    }
    if (!it->second.merged.edits.empty())
      outcome.findings.push_back({kProjectRuleId, it->first, it->second.merged.edits.front().line,
                                  it->second.merged.edits.front().column,
                                  "this file is generated by the build (it is under " + in.build.buildDir +
                                      "): its edits were not written; change what generates it by hand"});
    it = outcome.rendered.erase(it);
  }
  return true;
}

bool writeMigration(const MigrateOptions& options, const MigrationInputs& in, const EngineResult& result,
                    const MigrationOutcome& outcome, std::string& error) {
  if (options.toStdout) {
    llvm::outs() << outcome.rendered.at(in.files.front()).text;
    return true;
  }
  if (options.showDiff) {
    for (const auto& [path, r] : outcome.rendered) {
      const std::string& original = result.files.at(path).original;
      std::string relative = relativeTo(path, in.root);
      llvm::outs() << unifiedDiff(original, r.merged.edits, "a/" + relative, "b/" + relative);
    }
    return true;
  }
  return writeFiles(options, in, result, outcome, error);
}

void printFindings(const MigrateOptions& options, const MigrationInputs& in, MigrationOutcome& outcome) {
  std::vector<Finding>& findings = outcome.findings;
  // In source order, whichever rule or translation unit found them.
  stableSort(findings, [](const Finding& a, const Finding& b) {
    return std::tie(a.file, a.line, a.column) < std::tie(b.file, b.line, b.column);
  });
  size_t errors = 0;
  for (const Finding& f : findings) {
    errors += f.error;
    llvm::errs() << f.file << ":" << f.line << ":" << f.column << (f.error ? ": error: " : ": warning: ") << f.message
                 << " [" << f.ruleId << "]\n";
  }
  if (options.quiet) return;
  for (const auto& [path, r] : outcome.rendered) {
    std::map<std::string, int> perRule;
    for (const TextEdit& e : r.merged.edits) ++perRule[e.ruleId];
    llvm::errs() << "fabricize: " << relativeTo(path, in.root) << ": " << r.merged.edits.size() << " edits";
    const char* separator = " (";
    for (const auto& [id, count] : perRule) {
      llvm::errs() << separator << id << " " << count;
      separator = ", ";
    }
    llvm::errs() << (perRule.empty() ? "" : ")") << "\n";
  }
  if (!findings.empty()) llvm::errs() << "fabricize: " << findings.size() << " findings need a person\n";
  if (errors)
    llvm::errs() << "fabricize: " << errors << (errors == 1 ? " error" : " errors")
                 << ": training code the migration could not reach; as written, the ranks would "
                    "train unsynchronised copies there\n";
}

bool writeReports(const MigrateOptions& options, const MigrationInputs& in, const EngineResult& result,
                  const MigrationOutcome& outcome, std::string& error) {
  if (options.reportPaths.empty()) return true;
  MigrationReportData plan;
  plan.root = in.root;
  auto inRoot = [&](const std::string& path) {
    return isUnderOrEqual(path, in.root) && path != in.root ? relativeTo(path, in.root) : path;
  };
  // The code before and after: only the Markdown and HTML reports show it.
  const bool showsChanges =
      std::any_of(options.reportPaths.begin(), options.reportPaths.end(), [](const std::string& p) {
        llvm::StringRef extension = llvm::sys::path::extension(p);
        return extension == ".md" || extension == ".html";
      });
  for (const auto& [path, r] : outcome.rendered) {
    plan.files.push_back(inRoot(path));
    if (auto file = result.files.find(path); showsChanges && file != result.files.end() && !r.merged.edits.empty())
      plan.changes[inRoot(path)] =
          unifiedDiff(file->second.original, r.merged.edits, "a/" + inRoot(path), "b/" + inRoot(path));
  }
  for (const RuleMatch& m : result.matches)
    if (!m.reportOnly)
      plan.entries.push_back({ReportEntry::Automatic, m.ruleId, inRoot(m.file), m.line, m.explanation});
  for (const std::string& path : in.buildFiles)
    if (auto r = outcome.rendered.find(path); r != outcome.rendered.end())
      for (const TextEdit& e : r->second.merged.edits)
        plan.entries.push_back({ReportEntry::Automatic, e.ruleId, inRoot(path), e.line, e.explanation});
  for (const Finding& f : outcome.findings)
    plan.entries.push_back({findingKind(f.ruleId, f.message), f.ruleId, inRoot(f.file), f.line, f.message, f.error});
  std::vector<std::string> shardedLoaderClasses;
  for (const RuleMatch& m : result.matches)
    if (m.ruleId == "fabric-shard-loader-class" && !m.notMigrated)
      if (std::string name = loaderClassNamed(m.explanation); !name.empty()) shardedLoaderClasses.push_back(name);
  for (const Note& note : result.notes)
    if (note.ruleId == "fabric-data-loop")
      plan.dataLoops.push_back(dataLoopOf(inRoot(note.file), note.line, note.text, shardedLoaderClasses));
  const ReportSummary summary = summarize(plan);

  for (const std::string& reportPath : options.reportPaths) {
    llvm::StringRef extension = llvm::sys::path::extension(reportPath);
    if (extension == ".md" || extension == ".html") {
      error = writeFileAtomically(reportPath, extension == ".md" ? renderMarkdownReport(plan) : renderHtmlReport(plan));
      if (!error.empty()) return false;
      continue;
    }
    nlohmann::json report = {{"root", in.root},
                             {"files", nlohmann::json::array()},
                             {"findings", nlohmann::json::array()},
                             {"data_loops", nlohmann::json::array()},
                             {"summary",
                              {{"migrated_automatically", summary.automatic},
                               {"needs_a_person", summary.needsPerson},
                               {"not_understood", summary.notUnderstood},
                               {"automatic_percent", summary.automaticShare()},
                               {"training_loops",
                                {{"total", summary.loops},
                                 {"sharded", summary.loopsSharded},
                                 {"drawn_per_rank", summary.loopsPerRank},
                                 {"needs_a_person", summary.loopsNeedPerson},
                                 {"not_a_data_loop", summary.loopsNotData}}}}}};
    for (const DataLoopEntry& loop : plan.dataLoops) {
      static const char* const status[] = {"sharded", "drawn_per_rank", "needs_a_person", "not_a_data_loop"};
      report["data_loops"].push_back(
          {{"file", loop.file}, {"line", loop.line}, {"status", status[loop.status]}, {"text", loop.text}});
    }
    for (const auto& [path, r] : outcome.rendered) {
      nlohmann::json file = {{"path", path}, {"edits", nlohmann::json::array()}};
      for (const TextEdit& e : r.merged.edits)
        file["edits"].push_back({{"rule", e.ruleId},
                                 {"line", e.line},
                                 {"column", e.column},
                                 {"offset", e.offset},
                                 {"length", e.length},
                                 {"replacement", e.replacement},
                                 {"explanation", e.explanation}});
      report["files"].push_back(file);
    }
    for (const Finding& f : outcome.findings)
      report["findings"].push_back({{"rule", f.ruleId},
                                    {"path", f.file},
                                    {"line", f.line},
                                    {"column", f.column},
                                    {"severity", f.error ? "error" : "warning"},
                                    {"message", f.message}});
    error = writeFileAtomically(reportPath, report.dump(2) + "\n");
    if (!error.empty()) return false;
  }
  return true;
}

}  // namespace fabricize
