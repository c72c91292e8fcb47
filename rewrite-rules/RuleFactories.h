// The factory of every rule file, declared from the catalogue's list
// (Rules.def).
#pragma once

#include "Rule.h"

namespace fabricize {

#define FABRIC_RULE(factory) Rule factory();
#define FABRIC_RULE_WITH_OPTIONS(factory) Rule factory(const FabricOptions&);
#include "Rules.def"
#undef FABRIC_RULE
#undef FABRIC_RULE_WITH_OPTIONS

}  // namespace fabricize
