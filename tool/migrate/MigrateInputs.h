// fabricize migrate, its inputs: the options as given, and what they name
// (the compile commands, the project root, the sources, the build files).
// Part of the migrate front end (MigrateCommand.cpp); no other front end
// includes it.
#pragma once

#include "services/CommandLine.h"
#include "engine/Engine.h"
#include "inputs/Project.h"

#include "clang/Tooling/CompilationDatabase.h"

#include <memory>
#include <string>
#include <vector>

namespace fabricize {

struct MigrateOptions {
  std::vector<std::string> sources;
  std::string outputDir;  // -o
  bool inPlace = false, showDiff = false, toStdout = false, backup = false;
  bool addComments = false, emitCMake = false, allSources = false;
  bool instrument = false, listRules = false, quiet = false, version = false;
  std::vector<std::string> reportPaths;
  FabricOptions fabric;  // what the emitted Fabric asks for
  CommonFlags common;
};

// The migration's inputs, resolved.
struct MigrationInputs {
  std::unique_ptr<clang::tooling::CompilationDatabase> database;
  BuildTree build;                 // from -p
  std::string root, rootHow;       // the project root, and how it was found
  std::vector<std::string> files;  // the sources to migrate (absolute)
  std::string outRoot;             // -o, absolute
  // The project's CMake files, and the other configure inputs (mirrored as
  // they are).
  std::vector<std::string> buildFiles, configureFiles;
  std::vector<Finding> findings;  // sources the run cannot migrate
  size_t generatedSources = 0;

  // A file the build generates (under its build folder, unless that is the
  // project itself: an in-source build). The migrated tree's build generates
  // it again.
  bool generated(const std::string& path) const;
};

// Resolves what `options` name. False with `error` (nothing is written).
bool resolveMigrationInputs(const MigrateOptions& options, const CommonSettings& settings, MigrationInputs& inputs,
                            std::string& error);

// `path` relative to `root`, which holds it.
std::string relativeTo(const std::string& path, const std::string& root);

}  // namespace fabricize
