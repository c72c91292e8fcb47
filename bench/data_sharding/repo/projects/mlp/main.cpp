// A classifier trained through the repository's own loader class.
//   train_mlp [epochs] [samples] [hidden] [batch]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>

#include "loader.h"

struct Net : torch::nn::Module {
  torch::nn::Sequential body;
  Net(int64_t in, int64_t hidden, int64_t out)
      : body(torch::nn::Linear(in, hidden), torch::nn::ReLU(), torch::nn::Linear(hidden, hidden), torch::nn::ReLU(),
             torch::nn::Linear(hidden, hidden), torch::nn::ReLU(), torch::nn::Linear(hidden, out)) {
    register_module("body", body);
  }
  torch::Tensor forward(torch::Tensor x) { return body->forward(x); }
};

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 3;
  const int64_t samples = argc > 2 ? std::atoll(argv[2]) : 4096;
  const int64_t hidden = argc > 3 ? std::atoll(argv[3]) : 256;
  const size_t batch_size = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 64;
  std::srand(1);
  torch::manual_seed(1);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  data::Table table(samples, 32, 10, 7);
  data::TableLoader loader(table, batch_size, /*shuffle_=*/true);
  auto model = std::make_shared<Net>(32, hidden, 10);
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    double loss_sum = 0;
    int64_t correct = 0, seen = 0;
    std::tuple<torch::Tensor, torch::Tensor> batch;
    while (loader(batch)) {
      auto x = std::get<0>(batch).to(device);
      auto y = std::get<1>(batch).to(device);
      optimizer.zero_grad();
      auto out = model->forward(x);
      auto loss = torch::nn::functional::cross_entropy(out, y);
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>() * x.size(0);
      correct += out.argmax(1).eq(y).sum().item<int64_t>();
      seen += x.size(0);
    }
    std::printf("epoch %d loss %.4f acc %.4f\n", epoch, loss_sum / seen, static_cast<double>(correct) / seen);
  }
  return 0;
}
