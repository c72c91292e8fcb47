// Cluster environments: how a process learns its place in the job (global
// and local rank, world size, node, main address) from the variables the
// launcher or scheduler that started it set. Each one is a
// fabric::ClusterEnvironment (Lightning's plugin; the public interface is
// runtime/include/fabric/cluster_environment.h): the built-in ones here, or
// the program's own through Options::cluster_environment.
//
// Adding a built-in one (say PBS): write runtime/src/plugins/environments/pbs.cpp
// with a class deriving from fabric::ClusterEnvironment and a function
// returning it (as torchrun.cpp does), and list it in cluster_environment.cpp's
// table (one line; the order is the order of detection). Nothing else changes.
#pragma once

#include "plugins/environments/process_placement.h"

#include <fabric/cluster_environment.h>

#include <memory>
#include <optional>
#include <vector>

namespace fabric {

class Options;

namespace detail {

// The built-in environments, in the order they are tried.
const std::vector<std::shared_ptr<const ClusterEnvironment>>& built_in_environments();

// The placement from the first environment that detects itself: `chosen`
// (the program's, Options::cluster_environment; may be null), then the
// built-in ones; checked for consistency (std::runtime_error naming the
// environment). nullopt when none did (Fabric then starts the local ranks);
// a `chosen` that detected nothing is then reported on standard error.
std::optional<ProcessPlacement> placement_from_environment(const std::shared_ptr<ClusterEnvironment>& chosen);

// Whether this process is (or, once a Fabric is built, will be) global rank
// 0, from its environment alone, by the rules Fabric applies to the built-in
// environments: the first one that detects itself says its rank; without
// one, this process is its node's rank 0 (it starts the others), which is
// global rank 0 on node 0 (NODE_RANK, else GROUP_RANK, 0 or unset).
bool global_zero_from_environment();

// No launcher: this process is the node's rank 0 and starts the others
// (devices from the options, nodes from NODE_RANK/MASTER_ADDR/MASTER_PORT).
ProcessPlacement placement_from_options(const Options& options, int local_processes);

}  // namespace detail
}  // namespace fabric
