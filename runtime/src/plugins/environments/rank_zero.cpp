// Rank 0's files and commands without a Fabric (fabric/rank_zero.h): global
// rank 0 as the environment says (cluster_environment.h).
#include <fabric/rank_zero.h>

#include "plugins/environments/cluster_environment.h"

#include <cstring>

namespace fabric {

std::ofstream rank_zero_ofstream(const std::string& path, std::ios::openmode mode) {
  return detail::open_rank_zero_ofstream(detail::global_zero_from_environment(), path, mode);
}

FILE* detail::open_rank_zero_popen(bool global_zero, const char* command, const char* mode) {
  const bool writes = mode != nullptr && std::strchr(mode, 'w') != nullptr;
  // `cat` takes what the program writes and drops it; pclose waits for it
  // as it would for the real command.
  return ::popen(global_zero || !writes ? command : "cat > /dev/null", mode);
}

FILE* rank_zero_popen(const char* command, const char* mode) {
  return detail::open_rank_zero_popen(detail::global_zero_from_environment(), command, mode);
}

}  // namespace fabric
