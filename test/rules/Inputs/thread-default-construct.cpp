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

int main() {
  Classifier clf;
  Classifier* other = new Classifier;
  clf.fit();
  other->fit();
  delete other;
  return 0;
}
