// What happens after a rule matches, for every front end: the engine
// (migrate, lint, the LSP server) and the clang-tidy plugin record each
// match here, and decide here which recorded matches the threading analysis
// lets through. Neither repeats a decision the other makes.
#pragma once

#include "edits/EditSet.h"
#include "Rule.h"
#include "rule-helpers/Threading.h"

#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/Basic/SourceManager.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace fabricize {

// One match of one rule, in the terms of its translation unit.
struct RecordedMatch {
  std::string ruleId;
  clang::SourceLocation where;  // expansion location a person is shown
  std::string explanation;      // the rule's, or why the match was not migrated
  struct Edit {
    clang::FileID file;  // where a declaration preamble copied the main file: the copy
    TextEdit text;       // offsets into `file`; ruleIndex as the caller set it
  };
  std::vector<Edit> edits;
  std::vector<clang::FileID> includeFiles;  // files a rule wants <fabric/fabric.h> in
  threading::MatchNeeds needs;              // whose Fabric the edits need (Threading.h)
  bool reportOnly = false;                  // a finding for a person: a no-op edit, a diagnostic rule
  bool note = false;                        // a Note rule's: for the migration report only
  bool factOnly = false;                    // a fact for the threading analysis, nothing to show
  // Not migrated before the threading analysis (inside a macro expansion,
  // a rule's internal error): `explanation` says so; nothing else is set.
  bool skipped = false;
};

// Where a front end takes matches and edits from.
struct RecordingScope {
  // Whether a location's file may be edited and reported (under the
  // project root, not vendored); system headers never are. Unset: any file.
  std::function<bool(const clang::SourceManager&, clang::SourceLocation)> editable;
  // The translation unit's compile command reaches LibTorch's headers: an
  // edit that brings the runtime into code no training code holds (a
  // logger's file) may go there; in a tool without LibTorch it could not build.
  bool reachesLibTorch = true;
  // Edits in a function need the Fabric there (the catalogue's rules; not
  // verify's instrumentation).
  bool editsNeedFabric = true;
  // Only fabric-thread-fabric's facts are wanted (the clang-tidy plugin
  // collects them whichever checks run): nothing else is recorded.
  bool factsOnly = false;
  // TextEdit::ruleIndex of each recorded edit: the catalogue position by
  // default; the plugin also packs which match an edit came from.
  std::function<size_t()> editKey;
};

// The match `result` of `rule` (catalogue position `ruleIndex`): its case's
// explanation and edits as offsets, the Fabric its edits need. Nothing when
// the match is outside the scope, or carries nothing to apply, show or
// learn from.
std::optional<RecordedMatch> recordMatch(const Rule& rule, size_t ruleIndex,
                                         const clang::ast_matchers::MatchFinder::MatchResult& result,
                                         const RecordingScope& scope);

// The threading analysis over recorded matches (Threading.h), for one
// program or one translation unit. `threadingRuns`: fabric-thread-fabric
// itself runs (migrate, lint, a clang-tidy run that enables its check);
// when it does not, no edit may use a Fabric its function does not have,
// and a match that needs one passed in says which check would pass it.
std::vector<threading::Verdict> resolveMatches(const std::vector<threading::MatchNeeds>& matches, bool wholeProgram,
                                               bool threadingRuns = true);

// The rule that threads the Fabric into functions and classes.
inline constexpr const char* kThreadingRuleId = "fabric-thread-fabric";

}  // namespace fabricize
