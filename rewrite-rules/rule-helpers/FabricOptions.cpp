// What the emitted Fabric asks for, checked by the runtime's own option
// parser (runtime/src/options.cpp, which needs no LibTorch): a name the
// runtime would refuse at run time is refused at migration time, with the
// runtime's words (the valid names, the nearest one).
#include "Rule.h"

#include <fabric/options.h>

#include <stdexcept>

namespace fabricize {

std::optional<FabricOptionProblem> checkFabricOptions(const FabricOptions& options) {
  const std::pair<const char*, const std::string*> plain[] = {{"accelerator", &options.accelerator},
                                                              {"devices", &options.devices},
                                                              {"strategy", &options.strategy},
                                                              {"precision", &options.precision}};
  for (const auto& [field, value] : plain)
    if (!isPlainOptionValue(*value))
      return FabricOptionProblem{field, "'" + *value + "' is not a plain name (letters, digits, '-', '_', ',', '.')"};
  if (!options.num_nodes.empty() &&
      (options.num_nodes.size() > 6 || options.num_nodes.find_first_not_of("0123456789") != std::string::npos ||
       std::stoi(options.num_nodes) < 1))
    return FabricOptionProblem{"num_nodes", "takes a positive integer, got '" + options.num_nodes + "'"};
  const char* field = "";
  try {
    fabric::Options checked;
    field = "accelerator";
    checked.accelerator(options.accelerator);
    field = "devices";
    checked.devices(options.devices);
    field = "strategy";
    checked.strategy(options.strategy);
    field = "precision";
    checked.precision(options.precision);
  } catch (const std::invalid_argument& error) {
    return FabricOptionProblem{field, error.what()};
  }
  return std::nullopt;
}

}  // namespace fabricize
