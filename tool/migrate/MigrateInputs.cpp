#include "migrate/MigrateInputs.h"

#include "edits/BuildFiles.h"
#include "inputs/CompileCommands.h"
#include "utilities/StableOrder.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <set>

namespace fabricize {

namespace {

// Where `path` lands once created: its deepest existing ancestor resolved
// (symlinks followed), the rest appended. An -o that does not exist yet under
// a symlink into the project is then seen to be inside it.
std::string resolvedOutputPath(const std::string& path) {
  llvm::SmallString<256> existing(absolutePath(path));
  std::vector<std::string> missing;
  while (!existing.empty() && !llvm::sys::fs::exists(existing) && llvm::sys::path::has_parent_path(existing)) {
    missing.push_back(llvm::sys::path::filename(existing).str());
    llvm::sys::path::remove_filename(existing);
  }
  llvm::SmallString<256> resolved;
  if (llvm::sys::fs::real_path(existing, resolved)) resolved = existing;
  for (auto part = missing.rbegin(); part != missing.rend(); ++part) llvm::sys::path::append(resolved, *part);
  return std::string(resolved);
}

// --all: every source the database lists under the root.
bool databaseSources(const MigrateOptions& options, MigrationInputs& in, std::string& error) {
  const std::string& buildPath = options.common.buildPath;
  std::set<std::string> listed;
  for (const std::string& f : in.database->getAllFiles())
    if (llvm::sys::fs::is_regular_file(f)) listed.insert(absolutePath(f));
  for (const std::string& f : listed) {
    if (in.generated(f)) {
      ++in.generatedSources;
    } else if (!isUnderOrEqual(f, in.root)) {
      // Written under -o it would land outside the mirror; edited with -i
      // it would be a file outside the project. Neither: said, and left.
      in.findings.push_back({kProjectRuleId, f, 1, 1,
                             "compile_commands.json lists this source, but it is outside the project root " + in.root +
                                 (in.rootHow.empty() ? std::string() : " (" + in.rootHow + ")") +
                                 ": it was not migrated and nothing was written for it; give --root <a folder holding "
                                 "it and the project> to migrate it with the project, or migrate it on its own"});
    } else {
      in.files.push_back(f);
    }
  }
  if (!in.files.empty()) return true;
  error = listed.empty() ? buildPath + "/compile_commands.json lists no source that exists"
                         : buildPath + "/compile_commands.json lists no source under the project root " + in.root +
                               ": give --root <the project's folder>";
  return false;
}

// The project's build files: every CMake file the build's configure step
// read under the root (nested add_subdirectory trees, included modules),
// else the CMakeLists.txt beside and above the sources. Other configure
// inputs (configure_file templates) are mirrored as they are.
void findBuildFiles(MigrationInputs& in) {
  const BuildTree& build = in.build;
  if (!build.configureInputsKnown) {
    in.buildFiles = cmakeListsFor(in.files, in.root);
    return;
  }
  for (const std::string& path : build.configureInputs) {
    // CMake's own files (CMakeCache.txt, CMakeFiles/) are the build's,
    // even in an in-source build.
    if (!isUnderOrEqual(path, in.root) || in.generated(path) || path == build.buildDir + "/CMakeCache.txt" ||
        isUnderOrEqual(path, build.buildDir + "/CMakeFiles") || !llvm::sys::fs::is_regular_file(path))
      continue;
    (isCMakeScript(path) ? in.buildFiles : in.configureFiles).push_back(path);
  }
  // The top-level CMakeLists.txt first: notes about the whole project go there.
  stablePartition(in.buildFiles, [&](const std::string& p) { return p == in.root + "/CMakeLists.txt"; });
}

}  // namespace

std::string relativeTo(const std::string& path, const std::string& root) { return path.substr(root.size() + 1); }

bool MigrationInputs::generated(const std::string& path) const {
  return !build.buildDir.empty() && !root.empty() && !isUnderOrEqual(root, build.buildDir) &&
         isUnderOrEqual(path, build.buildDir);
}

bool resolveMigrationInputs(const MigrateOptions& options, const CommonSettings& settings, MigrationInputs& in,
                            std::string& error) {
  const CommonFlags& common = options.common;
  // Compile commands: after `--`, from -p, found next to the sources, or
  // LibTorch's defaults.
  in.database = explicitDatabase(common.sawDashDash, common.compilerFlags, common.buildPath, settings.query, error);
  if (!error.empty()) return false;

  // The project: --root, else what the build says (-p), else the inputs'
  // common folder.
  if (!common.buildPath.empty()) in.build = readBuildTree(common.buildPath);
  if (!common.root.empty()) {
    in.root = absolutePath(common.root);
  } else if (!common.buildPath.empty() && (!common.sawDashDash || !in.build.cmakeSourceDir.empty())) {
    in.root = projectRootOf(in.build, *in.database, &in.rootHow);
  }
  if (options.allSources && !databaseSources(options, in, error)) return false;
  for (const std::string& s : options.sources) {
    if (!llvm::sys::fs::is_regular_file(s)) {
      error = s + ": no such file";
      return false;
    }
    in.files.push_back(absolutePath(s));
  }
  if (in.root.empty()) in.root = commonDirectory(in.files);
  for (const std::string& f : in.files)
    if (!isUnderOrEqual(f, in.root)) {
      error = f + " is outside the project root " + in.root;
      return false;
    }
  if (!options.quiet && !in.rootHow.empty())
    llvm::errs() << "fabricize: project root " << in.root << " (" << in.rootHow << ")\n";
  if (!options.quiet && in.generatedSources)
    llvm::errs() << "fabricize: " << in.generatedSources << " source(s) under the build directory " << in.build.buildDir
                 << " are generated by the build: not migrated, not mirrored (the migrated tree's build "
                    "generates them)\n";
  if (!options.outputDir.empty()) {
    in.outRoot = absolutePath(options.outputDir);
    if (isUnderOrEqual(in.outRoot, in.root) || isUnderOrEqual(resolvedOutputPath(options.outputDir), in.root)) {
      error = "-o " + options.outputDir + " is inside the project root " + in.root +
              ": choose a directory outside the input tree (or use -i)";
      return false;
    }
  }
  if (!in.database) in.database = databaseFor(in.files.front(), settings.query);
  findBuildFiles(in);
  if (options.emitCMake && !in.buildFiles.empty()) {
    error = "--emit-cmake: the project has its own " + in.buildFiles.front() +
            ", which fabricize migrates; drop --emit-cmake";
    return false;
  }
  return true;
}

}  // namespace fabricize
