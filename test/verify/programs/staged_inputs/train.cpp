// Regression on points read from ./data/points.txt ("x y" per line), by
// path relative to the working folder, as many public examples read theirs.
#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <vector>

int main() {
  std::ifstream in("./data/points.txt");
  if (!in) {
    std::cerr << "cannot read ./data/points.txt\n";
    return 1;
  }
  std::vector<float> xs, ys;
  for (float x, y; in >> x >> y;) {
    xs.push_back(x);
    ys.push_back(y);
  }
  const auto n = static_cast<int64_t>(xs.size());
  auto inputs = torch::from_blob(xs.data(), {n, 1}).clone();
  auto targets = torch::from_blob(ys.data(), {n, 1}).clone();
  auto dataset = torch::data::datasets::TensorDataset(torch::cat({inputs, targets}, 1));
  torch::nn::Sequential model(torch::nn::Linear(1, 16), torch::nn::Tanh(), torch::nn::Linear(16, 1));
  torch::optim::SGD optimizer(model->parameters(), 0.05);
  for (int epoch = 1; epoch <= 40; ++epoch) {
    auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
        dataset, torch::data::DataLoaderOptions().batch_size(16));
    double total = 0;
    int batches = 0;
    for (auto& batch : *loader) {
      std::vector<torch::Tensor> rows;
      for (auto& example : batch) rows.push_back(example.data);
      const auto stacked = torch::stack(rows);
      const auto loss = torch::mse_loss(model->forward(stacked.narrow(1, 0, 1)), stacked.narrow(1, 1, 1));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
      ++batches;
    }
    std::cout << "epoch " << epoch << " loss " << total / batches << std::endl;
  }
}
