// Files and commands that only global rank 0 writes, with or without a
// Fabric at hand (Fabric::rank_zero_ofstream and Fabric::rank_zero_popen are
// the same with the Fabric's own rank). No LibTorch: fabric-run and the
// launcher build without it.
#pragma once

#include <cstdio>
#include <fstream>
#include <string>

namespace fabric {

namespace detail {
// `path` opened with `mode` on global rank 0; elsewhere a stream on
// /dev/null, which accepts every write and keeps nothing.
inline std::ofstream open_rank_zero_ofstream(bool global_zero, const std::string& path, std::ios::openmode mode) {
  return std::ofstream(global_zero ? path : std::string("/dev/null"), mode);
}
FILE* open_rank_zero_popen(bool global_zero, const char* command, const char* mode);
}  // namespace detail

// Fabric::rank_zero_ofstream without a Fabric, for code that has none at
// hand: a logger class of the program's own whose std::ofstream member is
// opened in its constructor, before or after fabric.launch():
//   CsvLog(const std::string& path) : out_(fabric::rank_zero_ofstream(path)) {}
// Global rank 0, as Lightning's rank_zero_only.rank decides it, from the
// process's environment: the variables of the launcher that started it
// (Fabric's own launcher and fabric-run, torchrun: RANK; SLURM:
// SLURM_PROCID; Open MPI: OMPI_COMM_WORLD_RANK, read as the Fabric reads
// them); without them (one process; or the process that fabric.launch()
// turns into rank 0, before and after launch) NODE_RANK/GROUP_RANK 0 or
// unset means rank 0. Other ranks get a stream on /dev/null. A cluster
// environment of the program's own (Options::cluster_environment) is not
// known here: under one, use Fabric::rank_zero_ofstream.
std::ofstream rank_zero_ofstream(const std::string& path, std::ios::openmode mode = std::ios::out);

// Fabric::rank_zero_popen without a Fabric (global rank 0 from the
// environment, as fabric::rank_zero_ofstream).
FILE* rank_zero_popen(const char* command, const char* mode);

}  // namespace fabric
