// A GCC-built training program that parallelises its data preparation with
// OpenMP (-fopenmp).
#include <omp.h>
#include <torch/torch.h>

#include <vector>

int main() {
  std::vector<float> values(64);
#pragma omp parallel for
  for (int i = 0; i < static_cast<int>(values.size()); ++i) values[i] = static_cast<float>(omp_get_thread_num());
  torch::Tensor x = torch::ones({2});
  torch::Tensor loss = x.sum();
  loss.backward();
  return 0;
}
