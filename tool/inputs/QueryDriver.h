// Compile commands as the build ran them. A command whose compiler is GCC
// was checked by GCC against GCC's own system include folders; Clang's
// driver does not search some of them (GCC's private include folder, with
// quadmath.h, openacc.h, backtrace.h ...), so such a project does not parse.
// As clangd's --query-driver does, the compiler is asked once per
// (compiler, language flags) which folders it searches, and the ones Clang
// lacks are added after Clang's own (-idirafter), so Clang's builtin headers
// still win.
#pragma once

#include "clang/Tooling/CompilationDatabase.h"

#include <memory>
#include <string>
#include <vector>

namespace fabricize {

struct DriverQueryOptions {
  bool enabled = true;
  // Compilers outside the system folders that may be run (globs on the
  // compiler's path as the command names it, or as its symlinks resolve).
  std::vector<std::string> globs;
  std::string resourceDir;  // Clang's builtin headers, as the parse uses them
  bool verbose = false;
};

// The folders a compiler from which fabricize runs compilers without being
// told: root's, not a project's.
const std::vector<std::string>& trustedCompilerDirs();

// "a,b" of --query-driver into globs; false with `error` for a bad glob.
bool parseQueryDriverGlobs(const std::string& value, std::vector<std::string>& out, std::string& error);

// `inner` with GCC's own system include folders added to each command whose
// compiler is GCC (g++, c++, cc, gcc, <target>-g++-<version>, symlinks
// resolved). A compiler that cannot be asked is a warning, never fatal.
std::unique_ptr<clang::tooling::CompilationDatabase> withDriverIncludes(
    std::unique_ptr<clang::tooling::CompilationDatabase> inner, const DriverQueryOptions& options);

// For a source that did not parse: why its compiler's include folders were
// not added (disabled, not trusted, not executable, the query failed), and
// what to do; empty when they were, or when the compiler is not GCC.
std::string driverIncludesHint(const clang::tooling::CompileCommand& command);

}  // namespace fabricize
