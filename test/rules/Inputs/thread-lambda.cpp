// Training code in lambdas. One that captures by reference (and so holds the
// optimizer in its closure) names the Fabric of the function around it,
// which gets the parameter. One that captures by name cannot: reported,
// left as it was.
#include <torch/torch.h>

void train_by_reference(torch::nn::Linear& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x) {
  auto step = [&](int64_t i) {
    auto loss = model->forward(x.slice(0, i, i + 8)).pow(2).mean();
    loss.backward();
    optimizer.step();
  };
  for (int64_t i = 0; i < x.size(0); i += 8) step(i);
}

void train_by_name(torch::nn::Linear& model, torch::optim::Optimizer& optimizer, const torch::Tensor& x) {
  auto step = [&model, &optimizer](const torch::Tensor& batch) {
    auto loss = model->forward(batch).pow(2).mean();
    loss.backward();
    optimizer.step();
  };
  step(x);
}

int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  torch::Tensor x = torch::randn({32, 4});
  train_by_reference(model, optimizer, x);
  train_by_name(model, optimizer, x);
  return 0;
}
