// Where a process sits in its job: what a cluster environment detects and
// what the launcher starts processes by. No LibTorch here.
#pragma once

#include <cstdlib>
#include <string>

namespace fabric {
namespace detail {

// Where this process sits in the job.
struct ProcessPlacement {
  int global_rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int num_nodes = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: rank 0 picks a free port (Fabric-launched jobs)
  // "torchrun", "slurm", "mpi" or "fabric" (a rank Fabric itself started);
  // empty when this process still has to start the others.
  std::string launcher;
};

// The variable through which a rank that Fabric's launcher (Fabric::launch()
// on rank 0, fabric-run) started reaches it: set in exactly those processes.
constexpr const char* kLauncherChannelVariable = "FABRIC_LAUNCHER_FD";

// Whether Fabric's own launcher started this process. (Where a process is,
// from any launcher's variables: cluster_environment.h.)
inline bool started_by_fabric_launcher() { return std::getenv(kLauncherChannelVariable) != nullptr; }

}  // namespace detail
}  // namespace fabric
