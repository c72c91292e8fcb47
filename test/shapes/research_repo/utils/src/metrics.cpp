#include "utils/metrics.h"

#include <cmath>

namespace utils {

int64_t correct(const torch::Tensor& logits, const torch::Tensor& target) {
  return logits.argmax(-1).eq(target).sum().item<int64_t>();
}

double psnr(const torch::Tensor& prediction, const torch::Tensor& target) {
  const double mse = torch::mse_loss(prediction, target).item<double>();
  return 10.0 * std::log10(1.0 / std::max(mse, 1e-10));
}

}  // namespace utils
