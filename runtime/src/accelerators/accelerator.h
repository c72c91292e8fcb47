// Accelerator: which kind of device trains (cpu, cuda), how many processes
// a node runs, and which device each local rank uses. Lightning Fabric's
// Accelerator, for the two LibTorch has here.
#pragma once

#include <fabric/options.h>

#include <torch/types.h>

#include <string>

namespace fabric {
namespace detail {

struct AcceleratorChoice {
  std::string accelerator;  // "cpu" or "cuda" ("auto" resolved)
  int visible = 1;          // CUDA devices visible (1 on CPU)
  int local_processes = 1;  // processes per node the devices option asks for
};

// Resolves Options::accelerator and checks Options::devices against what is
// visible; throws std::invalid_argument naming what is missing.
AcceleratorChoice choose_accelerator(const Options& options);

// The device of local rank `local_rank`: CPU, or the CUDA device the
// devices option lists at that position (its index when it lists none).
torch::Device device_for_local_rank(const AcceleratorChoice& choice, const Options& options, int local_rank);

}  // namespace detail
}  // namespace fabric
