#include "synth.h"

#include <cmath>

#ifdef RIDGE_WITH_OPENMP
#include <omp.h>
#endif

std::pair<torch::Tensor, torch::Tensor> make_regression(const SynthSpec& spec) {
  // Random draws stay sequential (one generator); only the target's
  // arithmetic is spread over threads, so the data is the same for any
  // thread count.
  torch::Tensor x = torch::randn({spec.size, spec.features});
  torch::Tensor eps = torch::randn({spec.size});
  torch::Tensor y = torch::empty({spec.size, 1});

  auto xa = x.accessor<float, 2>();
  auto ea = eps.accessor<float, 1>();
  auto ya = y.accessor<float, 2>();
  const float noise = static_cast<float>(spec.noise);

#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < spec.size; ++i) {
    const float a = xa[i][0], b = xa[i][1], c = xa[i][2], d = xa[i][3];
    ya[i][0] = std::sin(1.5f * a) + 0.5f * b * c - 0.25f * d * d + 0.3f * std::tanh(b + d) + noise * ea[i];
  }
  return {x, y};
}
