// Inputs and compile commands: which compile command each source is parsed
// with (the flags after `--`, a -p build directory, a compile_commands.json
// found above the file, else LibTorch's defaults), and how a source that did
// not parse is reported. Shared by every subcommand; knows no rule.
#pragma once

#include "inputs/QueryDriver.h"

#include "clang/Tooling/CompilationDatabase.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>
#include <vector>

namespace fabricize {

// The compile commands the user named: the flags after `--` (when
// `sawDashDash`), else build/compile_commands.json from `-p` (when
// `buildPath` is set). Null with an empty `error` when neither was given;
// null with `error` set when -p cannot be read. Commands a GCC ran get
// GCC's own include folders (QueryDriver.h).
std::unique_ptr<clang::tooling::CompilationDatabase> explicitDatabase(bool sawDashDash,
                                                                      const std::vector<std::string>& flags,
                                                                      const std::string& buildPath,
                                                                      const DriverQueryOptions& query,
                                                                      std::string& error);

// The compile commands for a file opened on its own (lint without -p, the
// language server), found as clangd finds them: compile_commands.json or
// compile_flags.txt in the file's folder or a folder above it, or in a
// build/ subfolder of one (the nearest wins), or in `commandsDir` when
// given. A listed file gets its command; a header gets the command of the
// source most like it (interpolated); anything else the default LibTorch
// flags. Extra flags after `--` win.
std::unique_ptr<clang::tooling::CompilationDatabase> databaseFor(const std::string& file,
                                                                 const DriverQueryOptions& query,
                                                                 const std::string& commandsDir = "");

// The nearest compile commands for `file` (clangd's search above), and the
// folder they were found in; null when there are none.
std::unique_ptr<clang::tooling::CompilationDatabase> findDatabaseFor(const std::string& file, std::string& foundIn);

// The driver query every front end runs with: Clang's builtin headers.
DriverQueryOptions defaultDriverQuery();

// A source that did not parse: "<path>: does not compile ..." and, when its
// compiler is a GCC whose include folders were not added, why and what to do.
void reportUnparsed(llvm::raw_ostream& os, const std::string& prefix, const std::string& shownPath,
                    const std::string& path, const clang::tooling::CompilationDatabase& database,
                    const std::string& consequence);

}  // namespace fabricize
