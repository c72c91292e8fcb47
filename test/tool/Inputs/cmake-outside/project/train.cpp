#include <torch/torch.h>

torch::Tensor loss_of(torch::Tensor x);

int main() {
  torch::Tensor x = torch::ones({2});
  torch::Tensor loss = loss_of(x);
  loss.backward();
  return 0;
}
