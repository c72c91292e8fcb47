// A rule of the catalogue: an id, a one-line summary for the docs, and a
// Clang Transformer rule whose metadata is the explanation shown with each
// match. The migrate tool, the lint and the IDE front ends all consume these
// values; none of them re-implements a rule.
#pragma once

#include "clang/Tooling/Transformer/RewriteRule.h"

#include <optional>
#include <string>
#include <vector>

namespace fabricize {

// What the emitted `fabric::Fabric` asks for (fabricize --accelerator ...).
struct FabricOptions {
  std::string accelerator = "auto";
  std::string devices = "auto";
  std::string strategy = "ddp";
  std::string precision = "32-true";
  std::string num_nodes;  // empty: not emitted (the runtime default is 1)
};

enum class RuleKind {
  Rewrite,     // every match carries edits
  Diagnostic,  // matches are reported, never edited: a person must decide
  // Matches are facts for the migration report (one per training loop: where
  // its data comes from), never findings, never edits, never in lint, the
  // LSP server or clang-tidy.
  Note,
};

struct Rule {
  std::string id;       // "fabric-backward": the doc page and lit test share it
  std::string step;     // DESIGN.md section 3 step: "1".."5" or "+"
  std::string summary;  // one line for --list-rules and docs/rules/<id>.md
  RuleKind kind = RuleKind::Rewrite;
  clang::transformer::RewriteRuleWith<std::string> rule;  // metadata: explanation
};

// Whether an option value may be pasted into the emitted C++ string
// literals: letters, digits, '-', '_', ',' and '.' only. fabricize and the
// clang-tidy plugin refuse anything else.
bool isPlainOptionValue(const std::string& value);

// A value of the emitted Fabric's options that the runtime would refuse:
// which one ("strategy"), and why, in the runtime's words.
struct FabricOptionProblem {
  std::string field;  // accelerator, devices, strategy, precision or num_nodes
  std::string message;
};

// Checks `options` against the runtime's own lists of names
// (runtime/src/options.cpp), so that `--strategy fsdpp` is refused when
// the code is written, not when it runs. Nothing when all are accepted.
std::optional<FabricOptionProblem> checkFabricOptions(const FabricOptions& options);

// The whole catalogue, in application order: where two rules insert text at
// the same place, the earlier rule's text comes first.
std::vector<Rule> buildCatalogue(const FabricOptions& options);

}  // namespace fabricize
