// Strategies by the name Options resolves to.
#pragma once

#include "strategies/strategy.h"

#include <memory>

namespace fabric {
namespace detail {

// "single_device", "ddp", "zero1", "zero2" or "fsdp" (resolved names).
std::unique_ptr<Strategy> make_strategy(const StrategyContext& context);

}  // namespace detail
}  // namespace fabric
