#include "utils/image_ops.h"

namespace utils {

torch::Tensor normalize(const torch::Tensor& images, const std::vector<double>& mean,
                        const std::vector<double>& std) {
  auto m = torch::tensor(mean, torch::kFloat).view({1, -1, 1, 1}).to(images.device());
  auto s = torch::tensor(std, torch::kFloat).view({1, -1, 1, 1}).to(images.device());
  return (images - m) / s;
}

torch::Tensor total_variation(const torch::Tensor& images) {
  auto dh = (images.slice(2, 1) - images.slice(2, 0, -1)).abs().mean();
  auto dw = (images.slice(3, 1) - images.slice(3, 0, -1)).abs().mean();
  return dh + dw;
}

void save_preview(const torch::Tensor& images, const std::string& path, int64_t n) {
  auto grid = images.detach().slice(0, 0, std::min<int64_t>(n, images.size(0))).to(torch::kCPU);
  // Side by side: N x C x H x W -> C x H x (N * W).
  grid = torch::cat(grid.unbind(0), 2).clamp(0, 1).contiguous();
  torch::save(grid, path);
}

}  // namespace utils
