#include <torch/torch.h>

#include "batches.h"

int main() {
  torch::Device device(torch::kCUDA);
  torch::nn::Linear model(4, 1);
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = model->forward(synthetic_batch(8).to(device)).sum();
    loss.backward();
    optimizer.step();
  }
}
