#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  NetImpl();
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

// A class that owns its model and optimizer, constructed with no arguments.
class Classifier {
 public:
  Classifier();
  void fit();

 private:
  Net model_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
};

Classifier::Classifier() : optimizer_(std::make_unique<torch::optim::Adam>(model_->parameters())) {}

void Classifier::fit() {
  torch::Tensor loss = model_->forward(torch::ones({2})).sum();
  loss.backward();
  optimizer_->step();
}

// An aggregate that holds an optimizer, brace-initialised: the Fabric
// member comes first, and so does the Fabric in its initialisers.
struct Stepper {
  Net model;
  torch::optim::Optimizer* optimizer = nullptr;
  void step() {
    torch::Tensor loss = model->forward(torch::ones({2})).sum();
    loss.backward();
    optimizer->step();
  }
};

int main() {
  Classifier clf;
  Classifier* other = new Classifier;
  clf.fit();
  other->fit();
  delete other;
  Net net;
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  Stepper stepper{net, &sgd};
  stepper.step();
  return 0;
}
