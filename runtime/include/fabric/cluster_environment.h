// fabric::ClusterEnvironment: how a process that a scheduler or launcher
// started learns its place in the job (Lightning's ClusterEnvironment
// plugin). Fabric knows torchrun's variables (which its own launcher and
// fabric-run set), SLURM's and Open MPI's; a program started by something
// else (PBS, LSF, MPICH's Hydra, a Kubernetes operator) brings its own:
//
//   struct HydraEnvironment : fabric::ClusterEnvironment {
//     std::string name() const override { return "hydra"; }
//     std::optional<fabric::ClusterPlacement> detect() const override {
//       const char* rank = std::getenv("PMI_RANK");
//       const char* size = std::getenv("PMI_SIZE");
//       if (!rank || !size) return std::nullopt;  // not started by Hydra
//       fabric::ClusterPlacement placement;
//       placement.global_rank = std::atoi(rank);
//       ...
//       return placement;
//     }
//   };
//   fabric::Fabric fabric(fabric::Options().devices(2).cluster_environment(
//       std::make_shared<HydraEnvironment>()));
//
// No LibTorch here (fabricize and fabric-run read the options too).
#pragma once

#include <optional>
#include <string>

namespace fabric {

// Where this process sits in its job, as its launcher or scheduler set it.
struct ClusterPlacement {
  int global_rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;  // processes on this node
  int node_rank = 0;
  // Where rank 0's rendezvous store listens (Lightning's main_address and
  // main_port, torchrun's MASTER_ADDR and MASTER_PORT).
  std::string main_address = "127.0.0.1";
  int main_port = 29500;
};

class ClusterEnvironment {
 public:
  virtual ~ClusterEnvironment() = default;
  // A short name for messages ("hydra", "pbs"); not empty, not "fabric".
  virtual std::string name() const = 0;
  // This process's placement when what this environment describes started
  // it (its variables are set), std::nullopt otherwise. Fabric checks the
  // placement (ranks within the world size) and names the environment when
  // it is not consistent. Called once, when the Fabric is constructed.
  virtual std::optional<ClusterPlacement> detect() const = 0;
};

}  // namespace fabric
