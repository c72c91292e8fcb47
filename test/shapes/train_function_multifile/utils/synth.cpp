#include "synth.h"

#include <omp.h>

#include <cmath>

std::pair<torch::Tensor, torch::Tensor> make_readings(const torch::Tensor& signatures, int64_t n,
                                                      double label_noise) {
  // All random numbers are drawn up front, in order, so the result does not
  // depend on the number of threads.
  auto labels = torch::randint(kFaults, {n}, torch::kLong);
  auto noise = torch::randn({n, kSensors});
  auto relabel = torch::rand({n});
  auto random_labels = torch::randint(kFaults, {n}, torch::kLong);

  auto readings = torch::empty({n, kSensors});
  auto out = readings.accessor<float, 2>();
  auto sig = signatures.accessor<float, 2>();
  auto lab = labels.accessor<int64_t, 1>();
  auto eps = noise.accessor<float, 2>();

  // Each sensor saturates: reading = tanh(signature + noise).
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t s = 0; s < kSensors; ++s) {
      out[i][s] = std::tanh(sig[lab[i]][s] + 0.8f * eps[i][s]);
    }
  }

  labels = torch::where(relabel < label_noise, random_labels, labels);
  return {readings, labels};
}
