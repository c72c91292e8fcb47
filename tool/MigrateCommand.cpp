// fabricize migrate: the default subcommand.
//
//   fabricize [migrate] <sources...> (-o <dir> | -i | --stdout) [options] [-- <compiler flags>]
//
// Exit codes: 0 migrated, 1 migrated with findings a person must read,
// 2 error (nothing written).
#include "MigrateCommand.h"

#include "BuildFiles.h"
#include "CMakeFileApi.h"
#include "CompileCommands.h"
#include "Diff.h"
#include "EditSet.h"
#include "Engine.h"
#include "FabricInclude.h"
#include "Instrumentation.h"
#include "MigrationReport.h"
#include "EngineSetup.h"
#include "Output.h"
#include "Pch.h"
#include "Project.h"
#include "QueryDriver.h"
#include "Rule.h"

#include "clang/Tooling/CompilationDatabase.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

namespace fabricize {

namespace {

namespace cl = llvm::cl;

cl::OptionCategory category("fabricize options");
cl::list<std::string> sources(cl::Positional, cl::desc("<source files>"), cl::cat(category));
cl::opt<std::string> outputDir("o", cl::desc("Write the migrated tree under <dir>, mirroring the project root"),
                               cl::value_desc("dir"), cl::cat(category));
cl::opt<bool> inPlace("i", cl::desc("Edit the files in place (atomic replace)"), cl::cat(category));
cl::opt<bool> showDiff("diff", cl::desc("Print a unified diff of the migration; write nothing"),
                       cl::cat(category));
cl::opt<bool> addComments("comments",
                          cl::desc("Add a `// fabricize(<rule-id>): ...` comment on each line a "
                                   "person must look at"),
                          cl::cat(category));
cl::opt<bool> toStdout("stdout", cl::desc("Print the migrated source of the single input file"),
                       cl::cat(category));
cl::opt<std::string> buildPath("p", cl::desc("Build directory holding compile_commands.json; it also gives "
                                            "the project root (the CMake source directory its "
                                            "CMakeCache.txt names, else the database's common folder)"),
                               cl::value_desc("dir"), cl::cat(category));
cl::opt<std::string> projectRoot("root", cl::desc("Project root (default: from -p, else the inputs' common "
                                                  "directory); nothing outside it is edited or written"),
                                 cl::value_desc("dir"), cl::cat(category));
cl::opt<std::string> accelerator("accelerator", cl::desc("Accelerator the emitted Fabric asks for"),
                                 cl::init("auto"), cl::cat(category));
cl::opt<std::string> devices("devices", cl::desc("Devices: a count, \"auto\", -1 or a list \"0,2\""),
                             cl::init("auto"), cl::cat(category));
cl::opt<std::string> strategy("strategy", cl::desc("Strategy: ddp, auto, single_device"),
                              cl::init("ddp"), cl::cat(category));
cl::opt<std::string> precision("precision", cl::desc("Precision, e.g. 32-true"), cl::init("32-true"),
                               cl::cat(category));
cl::opt<std::string> numNodes("num-nodes", cl::desc("Number of nodes"), cl::cat(category));
cl::opt<bool> emitCMake("emit-cmake", cl::desc("With -o: write a CMakeLists.txt that builds the "
                                               "migrated sources against find_package(Fabric)"),
                        cl::cat(category));
cl::list<std::string> reportPaths("report",
                                  cl::desc("Write a report: JSON (every edit and finding, and a summary), or "
                                           "for a file ending in .md or .html the migration report a team "
                                           "plans with (per file and rule: migrated automatically, needs a "
                                           "person, not understood); may be given more than once"),
                                  cl::value_desc("file"), cl::cat(category));
cl::opt<bool> instrument("instrument-for-verify",
                         cl::desc("Instead of migrating, add the records fabricize verify compares "
                                  "(fabric/verify.h) to a copy of the original program; needs -o"),
                         cl::Hidden, cl::cat(category));
cl::opt<bool> listRules("list-rules", cl::desc("List the rule catalogue and exit"), cl::cat(category));
cl::opt<bool> quiet("quiet", cl::desc("No summary on stderr"), cl::cat(category));
cl::opt<std::string> pchCache("pch-cache",
                              cl::desc("Where precompiled LibTorch headers are cached (default: "
                                       "$FABRICIZE_CACHE_DIR or ~/.cache/fabricize)"),
                              cl::value_desc("dir"), cl::cat(category));
cl::opt<bool> noPch("no-pch", cl::desc("Parse without a precompiled LibTorch header"), cl::cat(category));
cl::opt<std::string> pchCacheSize("pch-cache-size",
                                  cl::desc("Size limit of the PCH cache in MiB; the least recently used "
                                           "are evicted (default: $FABRICIZE_PCH_CACHE_MB, else 2048)"),
                                  cl::value_desc("MiB"), cl::cat(category));
cl::opt<std::string> queryDriver("query-driver",
                                 cl::desc("Compilers outside /usr/bin, /bin, /usr/local/bin and "
                                          "/usr/lib/ccache that may be run to ask for their include "
                                          "folders, as clangd's option (comma list of globs)"),
                                 cl::value_desc("globs"), cl::cat(category));
cl::opt<bool> noQueryDriver("no-query-driver",
                            cl::desc("Never run a compile command's compiler to ask for its include folders"),
                            cl::cat(category));
cl::opt<bool> verbose("verbose", cl::desc("Say what is being done"), cl::cat(category));
cl::opt<bool> allSources("all", cl::desc("Migrate every source of the compilation database given "
                                         "with -p (headers they include come along)"),
                         cl::cat(category));
cl::opt<unsigned> jobs("j", cl::desc("Translation units parsed at once (default: the machine's cores)"),
                       cl::value_desc("N"), cl::init(0), cl::cat(category));
cl::opt<bool> backup("backup", cl::desc("With -i: keep each edited file's original as <file>.orig"),
                     cl::cat(category));

constexpr int kMigrated = 0, kFindings = 1, kError = 2;


int fail(const std::string& message) {
  llvm::errs() << "fabricize: error: " << message << "\n";
  return kError;
}


// Where `path` lands once created: its deepest existing ancestor resolved
// (symlinks followed), the rest appended. An -o that does not exist yet under
// a symlink into the project is then seen to be inside it.
std::string resolvedOutputPath(const std::string& path) {
  llvm::SmallString<256> existing(absolutePath(path));
  std::vector<std::string> missing;
  while (!existing.empty() && !llvm::sys::fs::exists(existing) &&
         llvm::sys::path::has_parent_path(existing)) {
    missing.push_back(llvm::sys::path::filename(existing).str());
    llvm::sys::path::remove_filename(existing);
  }
  llvm::SmallString<256> resolved;
  if (llvm::sys::fs::real_path(existing, resolved)) resolved = existing;
  for (auto part = missing.rbegin(); part != missing.rend(); ++part)
    llvm::sys::path::append(resolved, *part);
  return std::string(resolved);
}

std::string relativeTo(const std::string& path, const std::string& root) {
  return path.substr(root.size() + 1);
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

std::string cmakeFor(const std::vector<std::string>& relativeSources) {
  std::string target = llvm::sys::path::stem(relativeSources.front()).str();
  std::string text =
      "# Written by fabricize --emit-cmake: builds the migrated program against the Fabric runtime.\n"
      "cmake_minimum_required(VERSION 3.18)\n"
      "project(" + target + "_fabric CXX)\n"
      "set(CMAKE_CXX_STANDARD 17)\n"
      "set(CMAKE_CXX_STANDARD_REQUIRED ON)\n"
      "find_package(Fabric CONFIG REQUIRED)\n"
      "add_executable(" + target;
  for (const std::string& s : relativeSources) text += " " + s;
  text += ")\ntarget_link_libraries(" + target + " PRIVATE Fabric::fabric)\n";
  return text;
}

}  // namespace

int runMigrate(int argc, const char** argv) {
  // `fabricize migrate ...` and `fabricize ...` are the same command.
  std::vector<const char*> args{argv[0]};
  std::vector<std::string> compilerFlags;
  bool sawDashDash = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (sawDashDash) {
      compilerFlags.push_back(arg);
    } else if (arg == "--") {
      sawDashDash = true;
    } else if (i == 1 && arg == "migrate") {
      continue;
    } else {
      args.push_back(argv[i]);
    }
  }
  cl::HideUnrelatedOptions(category);
  cl::SetVersionPrinter([](llvm::raw_ostream& os) { os << "fabricize " FABRICIZE_VERSION "\n"; });
  if (!cl::ParseCommandLineOptions(static_cast<int>(args.size()), args.data(),
                                   "fabricize: migrate single-device LibTorch code to fabric::Fabric\n",
                                   &llvm::errs()))
    return kError;

  for (const auto* value : {&accelerator, &devices, &strategy, &precision})
    if (!isPlainOptionValue(*value))
      return fail("option value '" + value->getValue() +
                  "' is not a plain name (letters, digits, '-', '_', ',', '.')");
  if (!numNodes.empty() && numNodes.find_first_not_of("0123456789") != std::string::npos)
    return fail("--num-nodes takes a positive integer, got '" + numNodes + "'");
  FabricOptions fabricOptions{accelerator, devices, strategy, precision, numNodes};
  std::vector<Rule> catalogue = instrument ? buildInstrumentation() : buildCatalogue(fabricOptions);
  if (instrument && outputDir.empty()) return fail("--instrument-for-verify writes a copy: give -o <dir>");

  if (listRules) {
    for (const Rule& rule : catalogue)
      llvm::outs() << rule.id << "\t" << rule.step << "\t" << rule.summary << "\n";
    return kMigrated;
  }
  if (allSources && !sources.empty()) return fail("--all migrates the database's sources: give no source files");
  if (allSources && buildPath.empty()) return fail("--all needs -p <build dir> (its compile_commands.json lists the sources)");
  if (!allSources && sources.empty()) return fail("no source files given (see --help)");
  if (backup && !inPlace) return fail("--backup goes with -i");
  int modes = !outputDir.empty() + inPlace + toStdout + showDiff;
  if (modes != 1) return fail("choose exactly one output: -o <dir>, -i, --stdout or --diff");
  if (toStdout && (allSources || sources.size() != 1)) return fail("--stdout takes exactly one source file");
  if (emitCMake && outputDir.empty()) return fail("--emit-cmake needs -o <dir>");

  uint64_t pchCacheMiB = kDefaultPchCacheMiB;
  std::string error;
  if (!pchCacheLimitMiB(pchCacheSize, pchCacheMiB, error)) return fail(error);
  DriverQueryOptions query = defaultDriverQuery();
  query.enabled = !noQueryDriver;
  query.verbose = verbose;
  if (!queryDriver.empty() && !parseQueryDriverGlobs(queryDriver, query.globs, error)) return fail(error);

  // Compile commands: after `--`, from -p, found next to the sources, or
  // LibTorch's defaults.
  std::unique_ptr<clang::tooling::CompilationDatabase> database =
      explicitDatabase(sawDashDash, compilerFlags, buildPath, query, error);
  if (!error.empty()) return fail(error);

  // The project: --root, else what the build says (-p), else the inputs'
  // common folder.
  BuildTree build;
  if (!buildPath.empty()) build = readBuildTree(buildPath);
  std::string root, rootHow;
  if (!projectRoot.empty()) {
    root = absolutePath(projectRoot);
  } else if (!buildPath.empty() && (!sawDashDash || !build.cmakeSourceDir.empty())) {
    root = projectRootOf(build, *database, &rootHow);
  }
  // Sources under the build directory are generated by the build (which
  // generates them again for the migrated tree), unless it is the project
  // itself (an in-source build).
  auto generated = [&](const std::string& path) {
    return !build.buildDir.empty() && !root.empty() && !isUnderOrEqual(root, build.buildDir) &&
           isUnderOrEqual(path, build.buildDir);
  };

  std::vector<std::string> files;
  std::vector<Finding> projectFindings;  // sources the run cannot migrate
  size_t generatedSources = 0;
  if (allSources) {
    std::set<std::string> listed;
    for (const std::string& f : database->getAllFiles())
      if (llvm::sys::fs::is_regular_file(f)) listed.insert(absolutePath(f));
    for (const std::string& f : listed) {
      if (generated(f)) {
        ++generatedSources;
      } else if (!isUnderOrEqual(f, root)) {
        // Written under -o it would land outside the mirror; edited with -i
        // it would be a file outside the project. Neither: said, and left.
        projectFindings.push_back(
            {kProjectRuleId, f, 1, 1,
             "compile_commands.json lists this source, but it is outside the project root " + root +
                 (rootHow.empty() ? std::string() : " (" + rootHow + ")") +
                 ": it was not migrated and nothing was written for it; give --root <a folder holding "
                 "it and the project> to migrate it with the project, or migrate it on its own"});
      } else {
        files.push_back(f);
      }
    }
    if (files.empty())
      return fail(listed.empty() ? buildPath + "/compile_commands.json lists no source that exists"
                                 : buildPath + "/compile_commands.json lists no source under the project root " +
                                       root + ": give --root <the project's folder>");
  }
  for (const std::string& s : sources) {
    if (!llvm::sys::fs::is_regular_file(s)) return fail(s + ": no such file");
    files.push_back(absolutePath(s));
  }
  if (root.empty()) root = commonDirectory(files);
  for (const std::string& f : files)
    if (!isUnderOrEqual(f, root)) return fail(f + " is outside the project root " + root);
  if (!quiet && !rootHow.empty()) llvm::errs() << "fabricize: project root " << root << " (" << rootHow << ")\n";
  if (!quiet && generatedSources)
    llvm::errs() << "fabricize: " << generatedSources << " source(s) under the build directory " << build.buildDir
                 << " are generated by the build: not migrated, not mirrored (the migrated tree's build "
                    "generates them)\n";
  std::string outRoot;
  if (!outputDir.empty()) {
    outRoot = absolutePath(outputDir);
    if (isUnderOrEqual(outRoot, root) || isUnderOrEqual(resolvedOutputPath(outputDir), root))
      return fail("-o " + outputDir + " is inside the project root " + root +
                  ": choose a directory outside the input tree (or use -i)");
  }

  if (!database) database = databaseFor(files.front(), query);

  // The project's build files: every CMake file the build's configure step
  // read under the root (nested add_subdirectory trees, included modules),
  // else the CMakeLists.txt beside and above the sources. Other configure
  // inputs (configure_file templates) are mirrored as they are.
  std::vector<std::string> buildFiles, configureFiles;
  if (build.configureInputsKnown) {
    for (const std::string& path : build.configureInputs) {
      // CMake's own files (CMakeCache.txt, CMakeFiles/) are the build's,
      // even in an in-source build.
      if (!isUnderOrEqual(path, root) || generated(path) || path == build.buildDir + "/CMakeCache.txt" ||
          isUnderOrEqual(path, build.buildDir + "/CMakeFiles") || !llvm::sys::fs::is_regular_file(path))
        continue;
      (isCMakeScript(path) ? buildFiles : configureFiles).push_back(path);
    }
    // The top-level CMakeLists.txt first: notes about the whole project go there.
    std::stable_partition(buildFiles.begin(), buildFiles.end(),
                          [&](const std::string& p) { return p == root + "/CMakeLists.txt"; });
  } else {
    buildFiles = cmakeListsFor(files, root);
  }
  if (emitCMake && !buildFiles.empty())
    return fail("--emit-cmake: the project has its own " + buildFiles.front() +
                ", which fabricize migrates; drop --emit-cmake");

  EngineOptions engineOptions = engineOptionsFor(root, argv[0], !noPch);
  if (!noPch && !pchCache.empty()) engineOptions.pch.cacheDir = pchCache;
  engineOptions.pch.verbose = verbose;
  engineOptions.pch.cacheLimitBytes = pchCacheMiB << 20;
  if (!build.buildDir.empty()) engineOptions.pch.projectDirs.push_back(build.buildDir);
  engineOptions.editsNeedFabric = !instrument;
  engineOptions.jobs = jobs ? jobs : std::max(1u, std::thread::hardware_concurrency());
  if (!quiet && files.size() > 1)
    engineOptions.progress = [&root](size_t index, size_t count, const std::string& path) {
      llvm::errs() << "fabricize: [" << index << "/" << count << "] " << relativeTo(path, root) << "\n";
    };
  EngineResult result = runRules(catalogue, *database, files, engineOptions);
  if (!result.failedSources.empty()) {
    for (const std::string& f : result.failedSources)
      reportUnparsed(llvm::errs(), "fabricize: ", f, f, *database, "nothing was written");
    return kError;
  }

  // Merge, add the include, render. Every input is written under -o, edited
  // or not, so the output tree builds on its own.
  for (const std::string& f : files)
    if (!result.files.count(f)) {
      FileResult unchanged;
      if (!readFile(f, unchanged.original)) return fail("cannot read " + f);
      result.files.emplace(f, std::move(unchanged));
    }
  std::vector<Finding> findings = projectFindings;
  findings.insert(findings.end(), result.findings.begin(), result.findings.end());
  if (addComments)
    for (const Finding& f : findings)
      if (auto file = result.files.find(f.file); file != result.files.end()) {
        TextEdit comment;
        if (findingComment(file->second.original, f, comment)) file->second.edits.push_back(comment);
      }
  std::map<std::string, RenderedFile> rendered = renderMigration(result.files, root);
  for (auto& [path, r] : rendered)
    for (const EditConflict& c : r.merged.conflicts)
      findings.push_back({c.dropped.ruleId, path, c.dropped.line, c.dropped.column,
                          "edit dropped: it overlaps an edit of " + c.kept.ruleId +
                              "; review this line by hand"});
  // Build files: edited as text, all of the project's at once (Torch found
  // at the top, linked in subdirectories), reported like the sources.
  std::vector<std::string> buildTexts(buildFiles.size());
  for (size_t i = 0; i < buildFiles.size(); ++i)
    if (!readFile(buildFiles[i], buildTexts[i])) return fail("cannot read " + buildFiles[i]);
  // Where LibTorch is linked, as CMake evaluated it (its File API), so a
  // link list in a variable or a function gets the runtime too; without it,
  // where the CMake text spells LibTorch.
  std::optional<LibTorchLinks> links;
  if (!buildFiles.empty() && !build.cmakeSourceDir.empty()) {
    std::string why;
    if (std::optional<CodeModel> model = readCodeModel(build, why, verbose)) {
      links.emplace();
      links->libTorchTargets = model->libTorchTargets.size();
      // Targets whose sources are all outside the root are not migrated:
      // they need no runtime.
      for (const CodeModel::LibTorchLink& link : model->libTorchLinks)
        if (std::any_of(link.sources.begin(), link.sources.end(),
                        [&](const std::string& s) { return isUnderOrEqual(s, root); }))
          links->sites.push_back({link.file, link.line, link.targets, link.onlyExecutables});
    } else if (!quiet) {
      llvm::errs() << "fabricize: CMake's codemodel is not available (" << why
                   << "): Fabric::fabric is linked where the CMake files name LibTorch\n";
    }
  }
  std::vector<BuildFileMigration> migrations =
      migrateCMakeProject(buildFiles, buildTexts, links ? &*links : nullptr);
  for (size_t i = 0; i < buildFiles.size(); ++i) {
    const std::string& path = buildFiles[i];
    FileResult buildFile;
    buildFile.original = std::move(buildTexts[i]);
    for (const BuildFileMigration::Note& note : migrations[i].notes)
      findings.push_back({kCMakeRuleId, path, note.line, 1, note.message});
    RenderedFile r;
    r.merged = mergeEdits(buildFile.original, migrations[i].edits);
    matchLineEndings(buildFile.original, r.merged.edits);
    r.text = applyEdits(buildFile.original, r.merged.edits);
    result.files[path] = std::move(buildFile);
    rendered[path] = std::move(r);
  }
  // A header the build generates (under its build directory) is not the
  // project's to edit: the migrated tree's build generates it again.
  for (auto it = rendered.begin(); it != rendered.end();) {
    if (!generated(it->first)) {
      ++it;
      continue;
    }
    if (!it->second.merged.edits.empty())
      findings.push_back({kProjectRuleId, it->first, it->second.merged.edits.front().line,
                          it->second.merged.edits.front().column,
                          "this file is generated by the build (it is under " + build.buildDir +
                              "): its edits were not written; change what generates it by hand"});
    it = rendered.erase(it);
  }

  // Write.
  std::vector<std::string> written;
  if (toStdout) {
    llvm::outs() << rendered.at(files.front()).text;
  } else if (showDiff) {
    for (const auto& [path, r] : rendered) {
      const std::string& original = result.files.at(path).original;
      std::string relative = relativeTo(path, root);
      llvm::outs() << unifiedDiff(original, r.merged.edits, "a/" + relative, "b/" + relative);
    }
  } else {
    // Every backup before any edit, and none when one would be overwritten:
    // a refusal leaves the tree as it was.
    if (backup) {
      for (const auto& [path, r] : rendered)
        if (!r.merged.edits.empty() && llvm::sys::fs::exists(path + ".orig"))
          return fail(path + ".orig exists: move it away, or run without --backup");
    }
    // Every file of the run is written, or none: all go to temporary files
    // first (a read-only directory or a full disk fails there), then are
    // renamed into place.
    std::vector<std::pair<std::string, std::string>> pending;
    if (backup) {
      for (const auto& [path, r] : rendered) {
        if (r.merged.edits.empty()) continue;
        pending.emplace_back(path + ".orig", result.files.at(path).original);
      }
    }
    for (const auto& [path, r] : rendered) {
      if (r.merged.edits.empty()) continue;
      std::string target = inPlace ? path : outRoot + "/" + relativeTo(path, root);
      pending.emplace_back(target, r.text);
      written.push_back(target);
    }
    // -o mirrors the project: the inputs, the project headers they read and
    // the build files, edited or not, so the output tree builds on its own.
    if (!inPlace) {
      std::set<std::string> mirrored(files.begin(), files.end());
      for (const std::string& path : result.projectFiles)
        if (!generated(path)) mirrored.insert(path);
      mirrored.insert(buildFiles.begin(), buildFiles.end());
      mirrored.insert(configureFiles.begin(), configureFiles.end());
      for (const std::string& path : mirrored) {
        if (auto r = rendered.find(path); r != rendered.end() && !r->second.merged.edits.empty()) continue;
        std::string text;
        if (!readFile(path, text)) return fail("cannot read " + path);
        std::string target = outRoot + "/" + relativeTo(path, root);
        pending.emplace_back(target, text);
        written.push_back(target);
      }
    }
    if (emitCMake) {
      std::vector<std::string> relativeSources;
      for (const std::string& f : files) relativeSources.push_back(relativeTo(f, root));
      pending.emplace_back(outRoot + "/CMakeLists.txt", cmakeFor(relativeSources));
    }
    std::string problem = writeFilesAtomically(pending);
    if (!problem.empty()) return fail(problem);
  }

  // In source order, whichever rule or translation unit found them.
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    return std::tie(a.file, a.line, a.column) < std::tie(b.file, b.line, b.column);
  });
  size_t errors = 0;
  for (const Finding& f : findings) {
    errors += f.error;
    llvm::errs() << f.file << ":" << f.line << ":" << f.column << (f.error ? ": error: " : ": warning: ")
                 << f.message << " [" << f.ruleId << "]\n";
  }
  if (!quiet) {
    for (const auto& [path, r] : rendered) {
      std::map<std::string, int> perRule;
      for (const TextEdit& e : r.merged.edits) ++perRule[e.ruleId];
      llvm::errs() << "fabricize: " << relativeTo(path, root) << ": " << r.merged.edits.size() << " edits";
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

  MigrationReportData plan;
  plan.root = root;
  auto inRoot = [&](const std::string& path) {
    return isUnderOrEqual(path, root) && path != root ? relativeTo(path, root) : path;
  };
  for (const auto& [path, r] : rendered) plan.files.push_back(inRoot(path));
  for (const RuleMatch& m : result.matches)
    if (!m.reportOnly) plan.entries.push_back({ReportEntry::Automatic, m.ruleId, inRoot(m.file), m.line, m.explanation});
  for (const std::string& path : buildFiles)
    if (auto r = rendered.find(path); r != rendered.end())
      for (const TextEdit& e : r->second.merged.edits)
        plan.entries.push_back({ReportEntry::Automatic, e.ruleId, inRoot(path), e.line, e.explanation});
  for (const Finding& f : findings)
    plan.entries.push_back({findingKind(f.ruleId, f.message), f.ruleId, inRoot(f.file), f.line, f.message, f.error});
  const ReportSummary summary = summarize(plan);

  for (const std::string& reportPath : reportPaths) {
    llvm::StringRef extension = llvm::sys::path::extension(reportPath);
    if (extension == ".md" || extension == ".html") {
      std::string problem = writeFileAtomically(
          reportPath, extension == ".md" ? renderMarkdownReport(plan) : renderHtmlReport(plan));
      if (!problem.empty()) return fail(problem);
      continue;
    }
    nlohmann::json report = {{"root", root}, {"files", nlohmann::json::array()},
                             {"findings", nlohmann::json::array()},
                             {"summary", {{"migrated_automatically", summary.automatic},
                                          {"needs_a_person", summary.needsPerson},
                                          {"not_understood", summary.notUnderstood},
                                          {"automatic_percent", summary.automaticShare()}}}};
    for (const auto& [path, r] : rendered) {
      nlohmann::json file = {{"path", path}, {"edits", nlohmann::json::array()}};
      for (const TextEdit& e : r.merged.edits)
        file["edits"].push_back({{"rule", e.ruleId}, {"line", e.line}, {"column", e.column},
                                 {"offset", e.offset}, {"length", e.length},
                                 {"replacement", e.replacement}, {"explanation", e.explanation}});
      report["files"].push_back(file);
    }
    for (const Finding& f : findings)
      report["findings"].push_back({{"rule", f.ruleId}, {"path", f.file}, {"line", f.line},
                                    {"column", f.column}, {"severity", f.error ? "error" : "warning"},
                                    {"message", f.message}});
    std::string problem = writeFileAtomically(reportPath, report.dump(2) + "\n");
    if (!problem.empty()) return fail(problem);
  }
  return findings.empty() ? kMigrated : kFindings;
}

}  // namespace fabricize
