#include "strategies/strategy_registry.h"

#include "strategies/ddp.h"
#include "strategies/fsdp.h"
#include "strategies/single_device.h"
#include "strategies/zero.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace fabric {
namespace detail {

std::unique_ptr<Strategy> make_strategy(const StrategyContext& context) {
  // Every strategy, by the name Options resolves to. Adding one: its class
  // in a file of its own with a factory, one line here, and its name (and
  // aliases) in options.cpp's table of strategy names.
  using Factory = std::unique_ptr<Strategy> (*)(const StrategyContext&);
  static const std::pair<const char*, Factory> kStrategies[] = {
      {"ddp", [](const StrategyContext& c) -> std::unique_ptr<Strategy> { return std::make_unique<DdpStrategy>(c); }},
      {"zero1", [](const StrategyContext& c) { return make_zero_strategy(c, 1); }},
      {"zero2", [](const StrategyContext& c) { return make_zero_strategy(c, 2); }},
      {"fsdp", make_fsdp_strategy},
      {"single_device", make_single_device_strategy},
  };
  for (const auto& [name, factory] : kStrategies)
    if (context.strategy == name) return factory(context);
  throw std::logic_error("fabric: no strategy named '" + context.strategy + "'");
}

}  // namespace detail
}  // namespace fabric
