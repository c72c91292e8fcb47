// A finding as the lint and the language server show it to a person.
#pragma once

#include "edits/EditSet.h"

#include <string>
#include <vector>

namespace fabricize {

// A rule match (with its edits as fix-it), or an engine finding that is not
// a match (code inside a macro).
struct LintFinding {
  std::string ruleId;
  std::string file;               // absolute
  unsigned line = 0, column = 0;  // 1-based, column in bytes
  std::string message;
  std::vector<TextEdit> edits;
};

}  // namespace fabricize
