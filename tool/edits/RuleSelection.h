// Which rules a report shows: --select/--ignore lists, the keys of a
// .fabricize.json, and clang-tidy style NOLINT comments. Pure text in, data
// out (no file system, no Clang), so the config parser can be fuzzed alone
// (test/fuzz/fuzz_config.cpp).
#pragma once

#include <string>
#include <vector>

namespace fabricize {

// `id` is selected by a pattern equal to it, a prefix of it ("fabric-" or
// "fabric-*"), or "*".
bool matchesPattern(const std::string& ruleId, const std::string& pattern);

// --select/--ignore, or the keys of a .fabricize.json: patterns as above.
struct RuleSelection {
  std::vector<std::string> select, ignore;  // empty select: every rule
  bool admits(const std::string& ruleId) const;
};

// "a, b,,c " -> {"a", "b", "c"}.
std::vector<std::string> splitList(const std::string& list);

// Empty when every pattern names at least one of `knownIds`; otherwise says
// which does not (a typo would otherwise select nothing and pass CI
// silently), with the nearest id. `option` names where the list came from.
std::string unknownPatternError(const std::vector<std::string>& patterns, const std::vector<std::string>& knownIds,
                                const std::string& option);

// The text of a .fabricize.json: an object with "select" and/or "ignore",
// each a list of rule ids/patterns or one comma-separated string. Patterns
// must name known rules. False, with `error` (prefixed by `origin`), when the
// text is not such an object; `out` is then every rule.
bool parseRuleSelection(const std::string& text, const std::string& origin, const std::vector<std::string>& knownIds,
                        RuleSelection& out, std::string& error);

// clang-tidy's comment conventions: `// NOLINT`, `// NOLINT(id, prefix-*)` on
// the line, `// NOLINTNEXTLINE(...)` on the line before, and lines between
// `// NOLINTBEGIN(...)` and `// NOLINTEND(...)`.
bool isSuppressed(const std::string& text, unsigned line, const std::string& ruleId);

}  // namespace fabricize
