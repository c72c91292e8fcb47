#include <torch/torch.h>

#include <iostream>

struct NetImpl : torch::nn::Module {
  NetImpl();
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

// A class with no constructor: its default member initialisers make the
// model and the optimizer (research code's compact trainer).
class Trainer {
 public:
  void train(int steps) {
    for (int i = 0; i < steps; ++i) {
      torch::Tensor loss = model_->forward(torch::ones({2})).sum();
      optimizer_.zero_grad();
      loss.backward();
      optimizer_.step();
      std::cout << "loss " << loss.item<float>() << "\n";
    }
  }

 private:
  Net model_;
  torch::optim::SGD optimizer_{model_->parameters(), torch::optim::SGDOptions(0.1)};
};

// No public section of its own; the optimizer held by pointer.
class Quiet {
  Net model_;
  std::unique_ptr<torch::optim::Adam> optimizer_ = std::make_unique<torch::optim::Adam>(model_->parameters());

 public:
  void step() {
    torch::Tensor loss = model_->forward(torch::ones({2})).sum();
    loss.backward();
    optimizer_->step();
  }
};

// A constructor of its own that leaves the optimizer to its default member
// initialiser: the setup is the last thing that constructor does.
class Configured {
 public:
  explicit Configured(int epochs) : epochs_(epochs) {}
  void fit() {
    for (int e = 0; e < epochs_; ++e) {
      torch::Tensor loss = model_->forward(torch::ones({2})).sum();
      loss.backward();
      optimizer_.step();
    }
  }

 private:
  int epochs_;
  Net model_;
  torch::optim::Adam optimizer_{model_->parameters()};
};

// A defaulted default constructor (`= default` makes nothing of its own):
// it becomes the constructor that takes the Fabric.
class Defaulted {
 public:
  Defaulted() = default;
  void step() {
    torch::Tensor loss = model_->forward(torch::ones({2})).sum();
    loss.backward();
    optimizer_.step();
  }

 private:
  Net model_;
  torch::optim::SGD optimizer_{model_->parameters(), torch::optim::SGDOptions(0.1)};
};

// An aggregate: no constructor to set up in, and a brace list may give any
// member: reported.
struct Bundle {
  Net model;
  torch::optim::SGD optimizer{model->parameters(), torch::optim::SGDOptions(0.1)};
};

int main() {
  Trainer trainer;
  trainer.train(10);
  auto quiet = std::make_unique<Quiet>();
  quiet->step();
  Configured configured(2);
  configured.fit();
  Defaulted defaulted;
  defaulted.step();
  Bundle bundle;
  torch::Tensor loss = bundle.model->forward(torch::ones({2})).sum();
  loss.backward();
  bundle.optimizer.step();
  return 0;
}
