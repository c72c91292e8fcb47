// Unified diffs of what fabricize changes (--diff), computed from the edits
// themselves: only the regions they touch are compared line by line.
#pragma once

#include "edits/EditSet.h"

#include <string>
#include <vector>

namespace fabricize {

// A unified diff (3 lines of context) turning `original` into the text
// `sortedEdits` produce; empty when there are no edits.
std::string unifiedDiff(const std::string& original, const std::vector<TextEdit>& sortedEdits,
                        const std::string& oldName, const std::string& newName);

}  // namespace fabricize
