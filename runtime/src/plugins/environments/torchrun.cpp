// torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// GROUP_RANK or NODE_RANK, MASTER_ADDR, MASTER_PORT), which Fabric's own
// launcher and fabric-run set too.
#include "plugins/environments/cluster_environment.h"
#include "utilities/environment_variables.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace fabric {
namespace detail {

std::optional<ProcessPlacement> torchrun_placement() {
  if (!(integer_variable("RANK") && integer_variable("WORLD_SIZE"))) {
    return std::nullopt;
  }
  ProcessPlacement placement;
  placement.global_rank = static_cast<int>(*integer_variable("RANK"));
  placement.world_size = static_cast<int>(*integer_variable("WORLD_SIZE"));
  placement.local_rank = static_cast<int>(integer_variable("LOCAL_RANK").value_or(placement.global_rank));
  placement.local_world_size = static_cast<int>(integer_variable("LOCAL_WORLD_SIZE").value_or(placement.world_size));
  placement.node_rank =
      static_cast<int>(integer_variable("GROUP_RANK").value_or(integer_variable("NODE_RANK").value_or(0)));
  placement.master_addr = string_variable("MASTER_ADDR", "127.0.0.1");
  placement.master_port = static_cast<int>(integer_variable("MASTER_PORT").value_or(29500));
  placement.launcher = started_by_fabric_launcher() ? "fabric" : "torchrun";
  return placement;
}

}  // namespace detail
}  // namespace fabric
