#include "plugins/environments/cluster_environment.h"

#include "utilities/environment_variables.h"
#include "utilities/messages.h"

#include <fabric/options.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace fabric {
namespace detail {

// Each built-in environment, in its own file under environments/.
std::shared_ptr<const ClusterEnvironment> torchrun_environment();
std::shared_ptr<const ClusterEnvironment> slurm_environment();
std::shared_ptr<const ClusterEnvironment> mpi_environment();

const std::vector<std::shared_ptr<const ClusterEnvironment>>& built_in_environments() {
  // torchrun's variables first: Fabric's launcher and fabric-run set them,
  // also inside a SLURM allocation or under mpirun.
  static const std::vector<std::shared_ptr<const ClusterEnvironment>> all = {
      torchrun_environment(),
      slurm_environment(),
      mpi_environment(),
  };
  return all;
}

namespace {

// `environment`'s placement, checked; nullopt when it detects nothing.
std::optional<ProcessPlacement> placement_of(const ClusterEnvironment& environment) {
  const std::string name = environment.name();
  const std::optional<ClusterPlacement> found = environment.detect();
  if (!found) return std::nullopt;
  ProcessPlacement placement;
  placement.global_rank = found->global_rank;
  placement.world_size = found->world_size;
  placement.local_rank = found->local_rank;
  placement.local_world_size = std::max(1, found->local_world_size);
  placement.node_rank = found->node_rank;
  placement.num_nodes = (placement.world_size + placement.local_world_size - 1) / placement.local_world_size;
  placement.master_addr = found->main_address;
  placement.master_port = found->main_port;
  placement.launcher = name;
  if (placement.world_size < 1 || placement.global_rank < 0 || placement.global_rank >= placement.world_size ||
      placement.local_rank < 0 || placement.local_rank >= placement.local_world_size || placement.node_rank < 0 ||
      placement.master_port < 0 || placement.master_port > 65535 ||
      (placement.master_port == 0 && placement.world_size > 1) || placement.master_addr.empty()) {
    throw std::runtime_error(
        "fabric: inconsistent " + name + " environment: rank " + std::to_string(placement.global_rank) +
        ", world size " + std::to_string(placement.world_size) + ", local rank " +
        std::to_string(placement.local_rank) + ", local world size " + std::to_string(placement.local_world_size) +
        ", node rank " + std::to_string(placement.node_rank) + ", main address '" + placement.master_addr +
        "', main port " + std::to_string(placement.master_port) +
        " (ranks start at 0 and stay below their sizes; the port is 1..65535)");
  }
  return placement;
}

}  // namespace

std::optional<ProcessPlacement> placement_from_environment(const std::shared_ptr<ClusterEnvironment>& chosen) {
  if (chosen) {
    const std::string name = chosen->name();
    if (name.empty() || name == "fabric") {
      throw std::invalid_argument("fabric: Options::cluster_environment: name() returned '" + name +
                                  "'; give the environment a name of its own for messages (not empty, not "
                                  "'fabric')");
    }
    // The ranks Fabric's own launcher started are placed by it (torchrun's
    // variables); the program's environment placed their rank 0.
    if (!started_by_fabric_launcher()) {
      if (auto placement = placement_of(*chosen)) return placement;
    }
  }
  for (const auto& environment : built_in_environments()) {
    if (auto placement = placement_of(*environment)) return placement;
  }
  if (chosen) {
    write_stderr_line("fabric: cluster environment '" + chosen->name() +
                      "' (Options::cluster_environment) detected nothing in this process's environment, nor did "
                      "torchrun's, SLURM's or Open MPI's: this process starts the job itself");
  }
  return std::nullopt;
}

bool global_zero_from_environment() {
  for (const auto& environment : built_in_environments()) {
    if (const auto placement = environment->detect()) return placement->global_rank == 0;
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
