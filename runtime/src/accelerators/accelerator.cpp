#include "accelerators/accelerator.h"

#include <torch/cuda.h>

#include <stdexcept>

namespace fabric {
namespace detail {

AcceleratorChoice choose_accelerator(const Options& options) {
  AcceleratorChoice choice;
  std::string accelerator = options.accelerator();
  const bool cuda_available = torch::cuda::is_available();
  if (accelerator == "auto") accelerator = cuda_available ? "cuda" : "cpu";
  if (accelerator == "cuda" && !cuda_available) {
    throw std::invalid_argument(
        "fabric: accelerator 'cuda' was requested, but CUDA is not available here (no GPU "
        "visible, or LibTorch built without CUDA). Use 'cpu' or 'auto'.");
  }
  const DeviceSelection& devices = options.devices();
  const int visible = accelerator == "cuda" ? static_cast<int>(torch::cuda::device_count()) : 1;
  if (accelerator == "cuda") {
    if (devices.kind == DeviceSelection::Kind::Count && devices.count > visible) {
      throw std::invalid_argument("fabric: devices=" + std::to_string(devices.count) + " but only " +
                                  std::to_string(visible) + " CUDA devices are visible");
    }
    for (int id : devices.ids) {
      if (id >= visible) {
        throw std::invalid_argument("fabric: CUDA device " + std::to_string(id) + " does not exist (" +
                                    std::to_string(visible) + " visible)");
      }
    }
  }
  // On CPU, devices=N means N processes (that is how CPU DDP runs); "auto" and
  // -1 mean one process, since one process already uses every core.
  choice.accelerator = accelerator;
  choice.visible = visible;
  choice.local_processes = devices.process_count(visible);
  return choice;
}

torch::Device device_for_local_rank(const AcceleratorChoice& choice, const Options& options, int local_rank) {
  if (choice.accelerator != "cuda") return torch::Device(torch::kCPU);
  const DeviceSelection& devices = options.devices();
  const int index = local_rank < static_cast<int>(devices.ids.size()) ? devices.ids[local_rank] : local_rank;
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

}  // namespace detail
}  // namespace fabric
