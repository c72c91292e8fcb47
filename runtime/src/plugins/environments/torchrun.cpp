// torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// GROUP_RANK or NODE_RANK, MASTER_ADDR, MASTER_PORT), which Fabric's own
// launcher and fabric-run set too.
#include "plugins/environments/cluster_environment.h"
#include "utilities/environment_variables.h"

#include <string>

namespace fabric {
namespace detail {

namespace {

class TorchrunEnvironment : public ClusterEnvironment {
 public:
  // "fabric" for a rank that Fabric's own launcher started: it supervises
  // the ranks it started (their output, their exits).
  std::string name() const override { return started_by_fabric_launcher() ? "fabric" : "torchrun"; }

  std::optional<ClusterPlacement> detect() const override {
    if (!(integer_variable("RANK") && integer_variable("WORLD_SIZE"))) return std::nullopt;
    ClusterPlacement placement;
    placement.global_rank = static_cast<int>(*integer_variable("RANK"));
    placement.world_size = static_cast<int>(*integer_variable("WORLD_SIZE"));
    placement.local_rank = static_cast<int>(integer_variable("LOCAL_RANK").value_or(placement.global_rank));
    placement.local_world_size = static_cast<int>(integer_variable("LOCAL_WORLD_SIZE").value_or(placement.world_size));
    placement.node_rank =
        static_cast<int>(integer_variable("GROUP_RANK").value_or(integer_variable("NODE_RANK").value_or(0)));
    placement.main_address = string_variable("MASTER_ADDR", "127.0.0.1");
    placement.main_port = static_cast<int>(integer_variable("MASTER_PORT").value_or(29500));
    return placement;
  }
};

}  // namespace

std::shared_ptr<const ClusterEnvironment> torchrun_environment() { return std::make_shared<TorchrunEnvironment>(); }

}  // namespace detail
}  // namespace fabric
