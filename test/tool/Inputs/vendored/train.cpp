#include <torch/torch.h>

#include "flags/flags.hpp"
#include "tinyjson.hpp"

int main(int argc, char** argv) {
  if (argc > 2) {
    flags::usage(argv[0]);
    return 1;
  }
  flags::banner(3);
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  torch::Tensor loss = model->forward(torch::ones({2, 4})).sum();
  loss.backward();
  optimizer.step();
  std::cout << "loss " << loss.item<double>() << "\n";
  tinyjson::write("metrics.json", "loss", loss.item<double>());
  if (!tinyjson::save("loss.txt", loss.item<double>())) std::cerr << "could not write loss.txt\n";
  return 0;
}
