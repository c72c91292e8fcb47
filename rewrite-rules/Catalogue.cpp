#include "RuleFactories.h"

#include <cctype>

namespace fabricize {

bool isPlainOptionValue(const std::string& value) {
  if (value.empty()) return false;
  for (char c : value)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ',' || c == '.')) return false;
  return true;
}

std::vector<Rule> buildCatalogue(const FabricOptions& options) {
  std::vector<Rule> catalogue;
#define FABRIC_RULE(factory) catalogue.push_back(factory());
#define FABRIC_RULE_WITH_OPTIONS(factory) catalogue.push_back(factory(options));
#include "Rules.def"
#undef FABRIC_RULE
#undef FABRIC_RULE_WITH_OPTIONS
  return catalogue;
}

}  // namespace fabricize
