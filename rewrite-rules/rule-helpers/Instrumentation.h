// The rules `fabricize verify` instruments an original program with (see
// Instrumentation.cpp). They are not in the catalogue.
#pragma once

#include "Rule.h"

#include <vector>

namespace fabricize {

std::vector<Rule> buildInstrumentation();

}  // namespace fabricize
