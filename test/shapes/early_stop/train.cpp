// Stops as soon as one mini-batch's loss falls under a threshold, even in the
// middle of an epoch.
#include <torch/torch.h>

#include <iostream>

struct FitDataset : torch::data::datasets::Dataset<FitDataset> {
  torch::Tensor x, y;
  explicit FitDataset(int64_t n) : x(torch::rand({n, 2}) * 2 - 1) {
    y = (3 * x.select(1, 0) - 2 * x.select(1, 1) + 1).unsqueeze(1) + 0.1 * torch::randn({n, 1});
  }
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  torch::optional<size_t> size() const override { return x.size(0); }
};

int main() {
  torch::manual_seed(13);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);

  auto model = torch::nn::Linear(2, 1);
  model->to(device);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.05));

  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      FitDataset(1024).map(torch::data::transforms::Stack<>()), 16);
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      FitDataset(256).map(torch::data::transforms::Stack<>()), 64);

  const double threshold = 0.005;
  const int max_epochs = 50;
  bool stop = false;
  int64_t step = 0;
  for (int epoch = 1; epoch <= max_epochs && !stop; ++epoch) {
    double epoch_loss = 0;
    int batches = 0;
    for (auto& batch : *loader) {
      auto input = batch.data.to(device), target = batch.target.to(device);
      sgd.zero_grad();
      auto loss = torch::mse_loss(model->forward(input), target);
      loss.backward();
      sgd.step();
      ++step;
      epoch_loss += loss.item<double>();
      ++batches;

      if (loss.item<double>() < threshold) {
        std::cout << "converged at step " << step << "\n";
        stop = true;
        break;
      }
    }
    std::cout << "epoch " << epoch << " loss " << epoch_loss / batches << "\n";
  }

  torch::NoGradGuard no_grad;
  double mse = 0;
  int n = 0;
  for (auto& batch : *test_loader) {
    mse += torch::mse_loss(model->forward(batch.data.to(device)), batch.target.to(device))
               .item<double>();
    ++n;
  }
  std::cout << "test loss " << mse / n << std::endl;
}
