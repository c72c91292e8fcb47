// Training code in lambdas. One that captures by reference (and so holds the
// optimizer in its closure) names the Fabric of the function around it,
// which gets the parameter. One that captures by name gets the Fabric added
// to its captures, and so does a lambda around it; in a class that holds the
// Fabric, `this`. A capture list a macro writes is reported, left as it was.
#include <torch/torch.h>

#include <iostream>

void train_by_reference(torch::nn::Linear& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x) {
  auto step = [&](int64_t i) {
    auto loss = model->forward(x.slice(0, i, i + 8)).pow(2).mean();
    loss.backward();
    optimizer.step();
  };
  for (int64_t i = 0; i < x.size(0); i += 8) step(i);
}

void loss_display(int step, float loss) { std::cout << "step " << step << " loss " << loss << std::endl; }

void train_by_name(torch::nn::Linear& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x) {
  int count = 0;
  auto step = [&model, &optimizer, count](const torch::Tensor& batch) {
    auto loss = model->forward(batch).pow(2).mean();
    loss.backward();
    optimizer.step();
    auto show = [count, &loss]() { loss_display(count, loss.item<float>()); };
    show();
  };
  step(x);
}

struct Trainer {
  torch::nn::Linear model{4, 1};
  torch::optim::SGD optimizer{model->parameters(), torch::optim::SGDOptions(0.1)};
  void fit(const torch::Tensor& x) {
    auto step = [&x](torch::nn::Linear& net, torch::optim::Optimizer& opt) {
      auto loss = net->forward(x).pow(2).mean();
      loss.backward();
      opt.step();
    };
    step(model, optimizer);
  }
};

#define CAPTURES [&model, &optimizer]

void train_in_macro(torch::nn::Linear& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x) {
  auto step = CAPTURES(const torch::Tensor& batch) {
    auto loss = model->forward(batch).pow(2).mean();
    loss.backward();
  };
  step(x);
}

int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  torch::Tensor x = torch::randn({32, 4});
  train_by_reference(model, optimizer, x);
  train_by_name(model, optimizer, x);
  Trainer trainer;
  trainer.fit(x);
  train_in_macro(model, optimizer, x);
  return 0;
}
