// libFuzzer target: the .fabricize.json parser (parseRuleSelection) and the
// NOLINT comment reader (isSuppressed), on arbitrary bytes.
//
// Checked: a parse either succeeds with no error or fails with an error that
// names the file; a successful selection names only known rules, and
// admits() agrees with its definition; splitList yields trimmed, non-empty
// items; isSuppressed answers for every line without reading out of bounds.
#include "edits/RuleSelection.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace fabricize;

namespace {

// A stand-in catalogue: the parser treats ids as data.
const std::vector<std::string> kRuleIds = {"fabric-backward", "fabric-cuda-call", "fabric-cuda-device",
                                           "fabric-setup", "fabric-launch", "fabric-insert"};

void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_config: %s: %s\n", what, detail.substr(0, 400).c_str());
  std::abort();
}

bool anyMatch(const std::vector<std::string>& patterns, const std::string& id) {
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) { return matchesPattern(id, p); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  RuleSelection selection;
  std::string error;
  bool ok = parseRuleSelection(text, "/p/.fabricize.json", kRuleIds, selection, error);
  if (ok != error.empty()) fail("result and error disagree", error);
  if (!ok && error.compare(0, 18, "/p/.fabricize.json") != 0) fail("error does not name the file", error);
  if (!ok && (!selection.select.empty() || !selection.ignore.empty())) fail("failed parse left a selection", text);
  for (const auto* list : {&selection.select, &selection.ignore})
    for (const std::string& pattern : *list)
      if (!std::any_of(kRuleIds.begin(), kRuleIds.end(), [&](const std::string& id) { return matchesPattern(id, pattern); }))
        fail("accepted a pattern naming no rule", pattern);
  for (const std::string& id : kRuleIds) {
    bool expected = (selection.select.empty() || anyMatch(selection.select, id)) && !anyMatch(selection.ignore, id);
    if (selection.admits(id) != expected) fail("admits() disagrees", id);
  }
  for (const std::string& item : splitList(text)) {
    if (item.empty() || item.find(',') != std::string::npos || item.front() == ' ' || item.front() == '\t' ||
        item.back() == ' ' || item.back() == '\t')
      fail("splitList item", item);
  }
  unsigned lines = static_cast<unsigned>(std::count(text.begin(), text.end(), '\n')) + 2;
  for (unsigned line = 1; line <= std::min(lines, 64u); ++line) isSuppressed(text, line, kRuleIds[line % kRuleIds.size()]);
  return 0;
}
