#include "plugins/environments/cluster_environment.h"

#include "utilities/environment_variables.h"

#include <fabric/options.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace fabric {
namespace detail {

// Each environment's detection, in its own file under environments/.
std::optional<ProcessPlacement> torchrun_placement();
std::optional<ProcessPlacement> slurm_placement();
std::optional<ProcessPlacement> mpi_placement();

const std::vector<ClusterEnvironment>& cluster_environments() {
  // torchrun's variables first: Fabric's launcher and fabric-run set them,
  // also inside a SLURM allocation or under mpirun.
  static const std::vector<ClusterEnvironment> all = {
      {"torchrun", torchrun_placement},
      {"slurm", slurm_placement},
      {"mpi", mpi_placement},
  };
  return all;
}

std::optional<ProcessPlacement> placement_from_environment() {
  std::optional<ProcessPlacement> found;
  for (const ClusterEnvironment& environment : cluster_environments()) {
    found = environment.detect();
    if (found) break;
  }
  if (!found) return std::nullopt;
  ProcessPlacement& placement = *found;
  placement.local_world_size = std::max(1, placement.local_world_size);
  placement.num_nodes = (placement.world_size + placement.local_world_size - 1) / placement.local_world_size;
  if (placement.world_size < 1 || placement.global_rank < 0 || placement.global_rank >= placement.world_size ||
      placement.local_rank < 0 || placement.local_rank >= placement.local_world_size) {
    throw std::runtime_error(
        "fabric: inconsistent " + placement.launcher + " environment: rank " + std::to_string(placement.global_rank) +
        ", world size " + std::to_string(placement.world_size) + ", local rank " +
        std::to_string(placement.local_rank) + ", local world size " + std::to_string(placement.local_world_size));
  }
  return found;
}

bool global_zero_from_environment() {
  for (const ClusterEnvironment& environment : cluster_environments()) {
    if (const auto placement = environment.detect()) return placement->global_rank == 0;
  }
  // As placement_from_options: global rank node_rank * local processes.
  return environment_integer("NODE_RANK", environment_integer("GROUP_RANK", 0)) == 0;
}

ProcessPlacement placement_from_options(const Options& options, int local_processes) {
  ProcessPlacement placement;
  placement.local_world_size = local_processes;
  placement.num_nodes = options.num_nodes();
  placement.world_size = local_processes * placement.num_nodes;
  placement.node_rank = environment_integer("NODE_RANK", environment_integer("GROUP_RANK", 0));
  placement.global_rank = placement.node_rank * local_processes;
  placement.master_addr = environment_string("MASTER_ADDR", "127.0.0.1");
  placement.master_port = environment_integer("MASTER_PORT", 0);
  if (placement.num_nodes > 1 && (std::getenv("MASTER_ADDR") == nullptr || std::getenv("MASTER_PORT") == nullptr ||
                                  std::getenv("NODE_RANK") == nullptr)) {
    throw std::invalid_argument("fabric: num_nodes=" + std::to_string(placement.num_nodes) +
                                " needs MASTER_ADDR, MASTER_PORT and NODE_RANK in the environment of every node "
                                "(or start the job with torchrun or SLURM)");
  }
  if (placement.node_rank < 0 || placement.node_rank >= placement.num_nodes) {
    throw std::invalid_argument("fabric: NODE_RANK=" + std::to_string(placement.node_rank) + " is outside 0.." +
                                std::to_string(placement.num_nodes - 1));
  }
  return placement;
}

}  // namespace detail
}  // namespace fabric
