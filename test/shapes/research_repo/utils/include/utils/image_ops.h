#pragma once
// Image helpers shared by the vision projects. They work on whatever device
// their input lives on.
#include <string>

#include <torch/torch.h>

namespace utils {

// (x - mean) / std per channel, for NCHW images.
torch::Tensor normalize(const torch::Tensor& images, const std::vector<double>& mean,
                        const std::vector<double>& std);

// Total variation of NCHW images (mean absolute difference of neighbours).
torch::Tensor total_variation(const torch::Tensor& images);

// A grid of the first `n` images of a batch, saved as a tensor file
// (the viewer script turns it into a PNG).
void save_preview(const torch::Tensor& images, const std::string& path, int64_t n = 8);

}  // namespace utils
