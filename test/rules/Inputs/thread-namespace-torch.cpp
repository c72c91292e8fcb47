// A project's own trainer class template declared inside `namespace torch`
// (issue 39): it is the project's, not LibTorch's, so it gets the Fabric
// like any trainer (a member, the constructor's parameter, the construction
// in main passes it).
#include <torch/torch.h>
#include <iostream>

namespace torch {
// The project's own trainer, in LibTorch's namespace (as some code bases do).
template <class TaskFactory>
class Trainer {
 public:
  Trainer(TaskFactory factory, double lr)
      : factory_(factory), model_(4, 1), optimizer_(model_->parameters(), torch::optim::SGDOptions(lr)) {}
  void train(int steps) {
    for (int step = 0; step < steps; ++step) {
      auto [x, y] = factory_.batch();
      optimizer_.zero_grad();
      auto loss = torch::mse_loss(model_->forward(x), y);
      loss.backward();
      optimizer_.step();
      std::cout << "step " << step << " loss " << loss.template item<float>() << std::endl;
    }
  }

 private:
  TaskFactory factory_;
  torch::nn::Linear model_;
  torch::optim::SGD optimizer_;
};
}  // namespace torch

struct Task {
  std::pair<torch::Tensor, torch::Tensor> batch() { return {torch::randn({8, 4}), torch::randn({8, 1})}; }
};

int main() {
  torch::Trainer<Task> trainer(Task{}, 0.1);
  trainer.train(3);
}
