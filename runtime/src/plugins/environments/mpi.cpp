// Open MPI's mpirun (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
// OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE; MASTER_ADDR and
// MASTER_PORT from the user).
#include "plugins/environments/cluster_environment.h"
#include "utilities/environment_variables.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace fabric {
namespace detail {

std::optional<ProcessPlacement> mpi_placement() {
  if (!(integer_variable("OMPI_COMM_WORLD_SIZE").value_or(1) > 1 && integer_variable("OMPI_COMM_WORLD_RANK"))) {
    return std::nullopt;
  }
  ProcessPlacement placement;
  placement.global_rank = static_cast<int>(*integer_variable("OMPI_COMM_WORLD_RANK"));
  placement.world_size = static_cast<int>(*integer_variable("OMPI_COMM_WORLD_SIZE"));
  placement.local_rank = static_cast<int>(integer_variable("OMPI_COMM_WORLD_LOCAL_RANK").value_or(0));
  placement.local_world_size =
      static_cast<int>(integer_variable("OMPI_COMM_WORLD_LOCAL_SIZE").value_or(placement.world_size));
  placement.node_rank = placement.global_rank / std::max(1, placement.local_world_size);
  placement.master_addr = string_variable("MASTER_ADDR", "127.0.0.1");
  placement.master_port = static_cast<int>(integer_variable("MASTER_PORT").value_or(29500));
  placement.launcher = "mpi";
  return placement;
}

}  // namespace detail
}  // namespace fabric
