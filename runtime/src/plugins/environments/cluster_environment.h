// Cluster environments: how a process learns its place in the job (global
// and local rank, world size, node, main address) from the variables the
// launcher or scheduler that started it set. Lightning Fabric's
// ClusterEnvironment plugins, as plain functions.
//
// Adding one (say PBS): write runtime/src/plugins/environments/pbs.cpp defining
// `std::optional<ProcessPlacement> pbs_placement()` (nullopt when its
// variables are absent), and list it in cluster_environment.cpp's table
// (one line; the order is the order of detection). Nothing else changes.
#pragma once

#include "plugins/environments/process_placement.h"

#include <optional>
#include <vector>

namespace fabric {

class Options;

namespace detail {

struct ClusterEnvironment {
  const char* name;  // also ProcessPlacement::launcher for messages
  std::optional<ProcessPlacement> (*detect)();
};

// Every environment, in the order they are tried.
const std::vector<ClusterEnvironment>& cluster_environments();

// The first environment that detects itself, its placement checked for
// consistency; nullopt when none did (Fabric then starts the local ranks).
std::optional<ProcessPlacement> placement_from_environment();

// Whether this process is (or, once a Fabric is built, will be) global rank
// 0, from its environment alone, by the rules Fabric applies: the first
// environment that detects itself says its rank; without one, this process
// is its node's rank 0 (it starts the others), which is global rank 0 on
// node 0 (NODE_RANK, else GROUP_RANK, 0 or unset).
bool global_zero_from_environment();

// No launcher: this process is the node's rank 0 and starts the others
// (devices from the options, nodes from NODE_RANK/MASTER_ADDR/MASTER_PORT).
ProcessPlacement placement_from_options(const Options& options, int local_processes);

}  // namespace detail
}  // namespace fabric
