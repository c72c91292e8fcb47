// The lint and language-server front ends: both run the migrate catalogue
// through the engine and show each RuleMatch as a finding with its fix-it.
// Nothing here defines a rule.
#pragma once

#include "EditSet.h"
#include "Engine.h"
#include "LintFinding.h"
#include "QueryDriver.h"
#include "RuleSelection.h"

#include "clang/Tooling/CompilationDatabase.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>
#include <vector>

namespace fabricize {

// `fabricize lint ...` and `fabricize lsp`; argv[0] is the subcommand.
int runLint(int argc, const char** argv);
int runLsp(int argc, const char** argv);

// --- shared by lint and lsp -------------------------------------------------

// Every match once, then the engine findings no match already stands for.
std::vector<LintFinding> findingsOf(const EngineResult& result);

// The nearest .fabricize.json in the file's directory or above (none: every
// rule). False, with `error`, when it exists but cannot be used.
bool selectionFor(const std::string& file, RuleSelection& out, std::string& error);

// The ids of the migrate catalogue: what --select, --ignore and
// .fabricize.json may name.
std::vector<std::string> catalogueIds();

// Whether any identifier in `text` is one the catalogue's matchers name:
// a file with none cannot match and need not be parsed.
bool mayMatchAnyRule(const std::string& text);

// The compile commands the user named: the flags after `--` (when
// `sawDashDash`), else build/compile_commands.json from `-p` (when
// `buildPath` is set). Null with an empty `error` when neither was given;
// null with `error` set when -p cannot be read. Commands a GCC ran get
// GCC's own include folders (QueryDriver.h).
std::unique_ptr<clang::tooling::CompilationDatabase> explicitDatabase(
    bool sawDashDash, const std::vector<std::string>& flags, const std::string& buildPath,
    const DriverQueryOptions& query, std::string& error);

// compile_commands.json found above `file` (clangd's search) when it lists
// the file, else the default LibTorch flags. Extra flags after `--` win.
std::unique_ptr<clang::tooling::CompilationDatabase> databaseFor(const std::string& file,
                                                                 const DriverQueryOptions& query);

// The driver query every front end runs with: Clang's builtin headers.
DriverQueryOptions defaultDriverQuery();

// A source that did not parse: "<path>: does not compile ..." and, when its
// compiler is a GCC whose include folders were not added, why and what to do.
void reportUnparsed(llvm::raw_ostream& os, const std::string& prefix, const std::string& shownPath,
                    const std::string& path, const clang::tooling::CompilationDatabase& database,
                    const std::string& consequence);

// The options every analysis runs with: Clang's builtin headers and the
// runtime's headers (a migrated program includes <fabric/fabric.h>); the
// PCH cache's size limit from $FABRICIZE_PCH_CACHE_MB (or its default).
// `projectRoot` is also the folder whose include folders the PCH ignores.
EngineOptions engineOptionsFor(const std::string& projectRoot, const char* argv0, bool usePch = true);

std::string absolutePath(const std::string& path);

}  // namespace fabricize
