#include <torch/torch.h>

// Outside the project that builds it: reported, never written.
torch::Tensor loss_of(torch::Tensor x) {
  torch::Tensor y = x.cuda();
  return y.sum();
}
