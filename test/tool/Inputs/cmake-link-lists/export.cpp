#include <torch/torch.h>

int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = model->forward(torch::randn({8, 4})).sum();
    loss.backward();
    optimizer.step();
  }
}
