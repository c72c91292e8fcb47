// fabricize migrate, its outputs: the project's CMake files migrated beside
// the sources, the files written (stdout, a diff, a mirrored tree, in
// place), the findings and the reports. Part of the migrate front end
// (MigrateCommand.cpp).
#pragma once

#include "services/FabricInclude.h"
#include "migrate/MigrateInputs.h"

#include <map>
#include <string>
#include <vector>

namespace fabricize {

// What a migration writes: every file rendered, and what a person must read.
struct MigrationOutcome {
  std::map<std::string, RenderedFile> rendered;  // absolute path -> text and applied edits
  std::vector<Finding> findings;
};

// Adds the project's CMake files, migrated (Torch found at the top, the
// runtime linked where LibTorch is), to `outcome`, and drops the files the
// build generates. False with `error` when a file cannot be read.
bool migrateBuildFiles(const MigrateOptions& options, const MigrationInputs& inputs, EngineResult& result,
                       MigrationOutcome& outcome, std::string& error);

// Writes the migration as the options ask: every file or none.
bool writeMigration(const MigrateOptions& options, const MigrationInputs& inputs, const EngineResult& result,
                    const MigrationOutcome& outcome, std::string& error);

// The findings on stderr, in source order, and unless --quiet a summary.
void printFindings(const MigrateOptions& options, const MigrationInputs& inputs, MigrationOutcome& outcome);

// --report files: JSON, Markdown or HTML.
bool writeReports(const MigrateOptions& options, const MigrationInputs& inputs, const EngineResult& result,
                  const MigrationOutcome& outcome, std::string& error);

}  // namespace fabricize
