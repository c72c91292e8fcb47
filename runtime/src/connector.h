// The connector (Lightning's _Connector): resolves Options (after the LT_*
// environment overrides) into objects: the accelerator and this process's
// device, the cluster environment's placement (the program's own, else a
// built-in one), the strategy by its resolved name, and the plugins the
// strategy owns (collectives, precision, checkpoint IO). Adding a component
// means one line here, not a change to Fabric.
#pragma once

#include <fabric/options.h>

#include "strategies/strategy.h"

#include <memory>

namespace fabric {
namespace detail {

// The strategy of a Fabric built from `options`, with its plugins attached.
// Throws std::invalid_argument for options this job cannot run (strategy
// 'single_device' with several processes, devices that are not there).
std::unique_ptr<Strategy> connect_strategy(const Options& options);

}  // namespace detail
}  // namespace fabric
