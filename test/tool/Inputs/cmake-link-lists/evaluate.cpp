#include <torch/torch.h>

torch::nn::Linear make_head();

int main() {
  torch::nn::Linear head = make_head();
  torch::optim::SGD optimizer(head->parameters(), 0.1);
  torch::Tensor loss = head->forward(torch::ones({2, 4})).sum();
  loss.backward();
  optimizer.step();
}
