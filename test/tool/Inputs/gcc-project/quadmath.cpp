// A GCC-built training program that accumulates in quad precision: <quadmath.h>
// is one of the headers only GCC's own include folder has.
#include <quadmath.h>
#include <torch/torch.h>

int main() {
  __float128 total = 0;
  torch::Tensor x = torch::ones({2});
  torch::Tensor loss = x.sum();
  loss.backward();
  total += 1;
  return total > 0 ? 0 : 1;
}
