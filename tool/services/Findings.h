// What the front ends show a person (lint, lsp): an engine run's matches and
// findings as LintFindings, the rule selection that applies to a file, and
// which files may match at all. Nothing here defines a rule or runs one.
#pragma once

#include "engine/Engine.h"
#include "edits/LintFinding.h"
#include "edits/RuleSelection.h"

#include <string>
#include <vector>

namespace fabricize {

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

}  // namespace fabricize
