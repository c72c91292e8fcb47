// See connector.h.
#include "connector.h"

#include "accelerators/accelerator.h"
#include "strategies/strategy_registry.h"
#include "plugins/environments/cluster_environment.h"

#include <stdexcept>
#include <string>

namespace fabric {
namespace detail {
namespace {

// "auto" is ddp with several processes, single_device with one.
std::string resolve_strategy_name(const Options& options, const ProcessPlacement& placement) {
  std::string strategy = options.strategy();
  if (strategy == "auto") strategy = placement.world_size > 1 ? "ddp" : "single_device";
  if (strategy == "single_device" && placement.world_size > 1) {
    throw std::invalid_argument("fabric: strategy 'single_device' runs one process, but the job has " +
                                std::to_string(placement.world_size) + " (devices=" + options.devices().to_string() +
                                ", num_nodes=" + std::to_string(placement.num_nodes) + "). Use 'ddp' or 'auto'.");
  }
  return strategy;
}

}  // namespace

std::unique_ptr<Strategy> connect_strategy(const Options& options) {
  const AcceleratorChoice accelerator = choose_accelerator(options);
  // A launcher or scheduler that started this process says where it is;
  // otherwise it is its node's rank 0 and starts the others.
  ProcessPlacement placement;
  if (auto from_environment = placement_from_environment(options.cluster_environment())) {
    placement = *from_environment;
  } else {
    placement = placement_from_options(options, accelerator.local_processes);
  }
  const torch::Device device = device_for_local_rank(accelerator, options, placement.local_rank);

  StrategyContext context;
  context.options = options;
  context.strategy = resolve_strategy_name(options, placement);
  context.rank = placement.global_rank;
  context.world_size = placement.world_size;
  context.device = device;
  std::unique_ptr<Strategy> strategy = make_strategy(context);

  StrategyPlugins plugins;
  plugins.collectives = std::make_unique<Collectives>(placement, options.timeout(), device);
  plugins.precision = std::make_unique<Precision>(options, device);
  plugins.checkpoint_io = std::make_unique<CheckpointIO>();
  strategy->attach(std::move(plugins));
  return strategy;
}

}  // namespace detail
}  // namespace fabric
