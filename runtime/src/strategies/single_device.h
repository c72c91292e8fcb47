// "single_device": one process, nothing to synchronize.
#pragma once

#include "strategies/strategy.h"

#include <memory>

namespace fabric {
namespace detail {

std::unique_ptr<Strategy> make_single_device_strategy(const StrategyContext& context);

}  // namespace detail
}  // namespace fabric
