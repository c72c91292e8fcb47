// "fsdp": zero2 plus the parameters (ZeRO stage 3); see fsdp.cpp.
#pragma once

#include "strategies/strategy.h"

#include <memory>

namespace fabric {
namespace detail {

std::unique_ptr<Strategy> make_fsdp_strategy(const StrategyContext& context);

}  // namespace detail
}  // namespace fabric
