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

namespace {

class MpiEnvironment : public ClusterEnvironment {
 public:
  std::string name() const override { return "mpi"; }

  std::optional<ClusterPlacement> detect() const override {
    if (!(integer_variable("OMPI_COMM_WORLD_SIZE").value_or(1) > 1 && integer_variable("OMPI_COMM_WORLD_RANK"))) {
      return std::nullopt;
    }
    ClusterPlacement placement;
    placement.global_rank = static_cast<int>(*integer_variable("OMPI_COMM_WORLD_RANK"));
    placement.world_size = static_cast<int>(*integer_variable("OMPI_COMM_WORLD_SIZE"));
    placement.local_rank = static_cast<int>(integer_variable("OMPI_COMM_WORLD_LOCAL_RANK").value_or(0));
    placement.local_world_size =
        static_cast<int>(integer_variable("OMPI_COMM_WORLD_LOCAL_SIZE").value_or(placement.world_size));
    placement.node_rank = placement.global_rank / std::max(1, placement.local_world_size);
    placement.main_address = string_variable("MASTER_ADDR", "127.0.0.1");
    placement.main_port = static_cast<int>(integer_variable("MASTER_PORT").value_or(29500));
    return placement;
  }
};

}  // namespace

std::shared_ptr<const ClusterEnvironment> mpi_environment() { return std::make_shared<MpiEnvironment>(); }

}  // namespace detail
}  // namespace fabric
