// One translation unit parsed for the engine: with the cached LibTorch PCH
// (and, in the language server, the document's own preamble chained on
// it), again with a rebuilt PCH when it was stale, else plainly; the
// declarations the source itself parsed are handed to a MatchFinder. What
// the matches mean is the engine's (Engine.cpp).
#pragma once

#include "engine/EngineOptions.h"

#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Tooling/CompilationDatabase.h"

#include <functional>
#include <optional>
#include <set>
#include <string>

namespace fabricize {

// What the engine knows of the translation unit being matched.
struct UnitFacts {
  // Its compile command reaches LibTorch's headers (its target links
  // LibTorch, and so the runtime once migrated): an edit that brings the
  // runtime into code no training code holds (a logger class's file) can go
  // there; in a tool of the project that has no LibTorch it could not build.
  bool reachesLibTorch = true;
};

// What a parse of one source found.
struct ParsedUnit {
  bool failed = true;                  // did not parse: nothing it matched may be used
  bool cancelled = false;              // stopped by EngineOptions::cancelled
  bool definesMain = false;            // a program's main: then every call is in the matched code
  std::set<std::string> projectFiles;  // the files under the root it read
  PreambleReport preamble;
};

// Called before each parse attempt with a fresh MatchFinder: the caller
// drops what an earlier attempt recorded and adds its matchers, whose
// callbacks may read `unit` while they run.
using BeginAttempt = std::function<void(clang::ast_matchers::MatchFinder&, const UnitFacts& unit)>;

// Parses `source` with its compile command from `database` and matches it.
ParsedUnit parseAndMatch(const clang::tooling::CompilationDatabase& database, const std::string& source,
                         const std::optional<std::string>& pch, const EngineOptions& options,
                         const BeginAttempt& beginAttempt);

// A file's real path as its translation unit resolved it: names relative to
// the compile command's folder resolve there, not in this process's working
// folder (each worker's file system has its own).
std::string realPathOf(clang::FileEntryRef entry);

// The main file for a declaration preamble's copy of it (the declarations
// above the edited one were parsed there; Preamble.h), else `file`: edits
// and findings there are the main file's, at the same offsets.
clang::FileID mainFileOf(const clang::SourceManager& sm, clang::FileID file);

// Whether `path` is under `root` (an empty root holds everything).
bool isUnder(const std::string& path, const std::string& root);

}  // namespace fabricize
