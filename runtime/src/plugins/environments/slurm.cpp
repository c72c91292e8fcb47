// SLURM: srun started every rank (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
// SLURM_NODEID, SLURM_NNODES, SLURM_NTASKS_PER_NODE; the main address is
// MASTER_ADDR or the first host of SLURM_NODELIST).
#include "plugins/environments/cluster_environment.h"
#include "utilities/environment_variables.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace fabric {
namespace detail {

namespace {

// SLURM_NODELIST "node[03-05,07],gpu1" -> "node03" (the first host).
std::string first_slurm_host(const std::string& nodelist) {
  std::string entry;
  int depth = 0;
  for (char c : nodelist) {
    if (c == ',' && depth == 0) break;
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    entry += c;
  }
  const auto open = entry.find('[');
  if (open == std::string::npos) return entry;
  const std::string range = entry.substr(open + 1);
  return entry.substr(0, open) + range.substr(0, range.find_first_of(",-]"));
}

class SlurmEnvironment : public ClusterEnvironment {
 public:
  std::string name() const override { return "slurm"; }

  std::optional<ClusterPlacement> detect() const override {
    if (!(integer_variable("SLURM_NTASKS").value_or(1) > 1 && integer_variable("SLURM_PROCID") &&
          string_variable("SLURM_JOB_NAME") != "bash" && string_variable("SLURM_JOB_NAME") != "interactive")) {
      return std::nullopt;
    }
    ClusterPlacement placement;
    // As Lightning: srun started every rank; an interactive allocation did not.
    placement.global_rank = static_cast<int>(*integer_variable("SLURM_PROCID"));
    placement.world_size = static_cast<int>(*integer_variable("SLURM_NTASKS"));
    placement.local_rank = static_cast<int>(integer_variable("SLURM_LOCALID").value_or(0));
    placement.node_rank = static_cast<int>(integer_variable("SLURM_NODEID").value_or(0));
    const long nodes = std::max(1L, integer_variable("SLURM_NNODES").value_or(1));
    placement.local_world_size =
        static_cast<int>(integer_variable("SLURM_NTASKS_PER_NODE").value_or(placement.world_size / nodes));
    placement.main_address = string_variable("MASTER_ADDR", first_slurm_host(string_variable("SLURM_NODELIST")));
    const std::string job = string_variable("SLURM_JOB_ID", "0");
    const int default_port = 10000 + std::atoi(job.substr(job.size() > 4 ? job.size() - 4 : 0).c_str());
    placement.main_port = static_cast<int>(integer_variable("MASTER_PORT").value_or(default_port));
    return placement;
  }
};

}  // namespace

std::shared_ptr<const ClusterEnvironment> slurm_environment() { return std::make_shared<SlurmEnvironment>(); }

}  // namespace detail
}  // namespace fabric
