#pragma once
#include <torch/torch.h>

namespace utils {

// Running average of a scalar (loss per batch, time per step, ...).
class AverageMeter {
 public:
  void update(double value, int64_t n = 1) {
    sum_ += value * n;
    count_ += n;
  }
  double avg() const { return count_ ? sum_ / count_ : 0.0; }
  void reset() { sum_ = 0, count_ = 0; }

 private:
  double sum_ = 0;
  int64_t count_ = 0;
};

// Number of rows of `logits` whose argmax is `target` (any leading shape).
int64_t correct(const torch::Tensor& logits, const torch::Tensor& target);

// Peak signal-to-noise ratio in dB of images in [0, 1].
double psnr(const torch::Tensor& prediction, const torch::Tensor& target);

}  // namespace utils
