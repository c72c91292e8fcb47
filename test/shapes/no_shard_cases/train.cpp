// Next-value prediction on a noisy sine wave, with the loops a migration must
// leave alone:
//  - training batches come from a torch::data loader (its sampler is the
//    place to split the data, not the loop);
//  - a generation loop (no backward) rolling the model out for 20 steps;
//  - a handful of fixed probes evaluated one by one;
//  - a fine-tuning phase that is already split across ranks by hand, from
//    the RANK / WORLD_SIZE environment variables of a launcher.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

constexpr int64_t kWindow = 8;

// Windows of kWindow consecutive values of a noisy sine and the value after.
void make_windows(int64_t n, double freq, torch::Tensor& x, torch::Tensor& y) {
  auto t = torch::arange(n + kWindow + 1, torch::kFloat);
  auto noise = 0.3 * torch::randn({n + kWindow + 1});
  auto series = torch::sin(t * freq) + noise;
  x = series.unfold(0, kWindow, 1).slice(0, 0, n).contiguous();  // [n, kWindow]
  y = series.slice(0, kWindow, kWindow + n).unsqueeze(1).contiguous();
}

class SeriesDataset : public torch::data::datasets::Dataset<SeriesDataset> {
 public:
  SeriesDataset(torch::Tensor x, torch::Tensor y) : x_(std::move(x)), y_(std::move(y)) {}
  torch::data::Example<> get(size_t index) override {
    return {x_[static_cast<int64_t>(index)], y_[static_cast<int64_t>(index)]};
  }
  torch::optional<size_t> size() const override { return static_cast<size_t>(x_.size(0)); }

 private:
  torch::Tensor x_, y_;
};

struct Predictor : torch::nn::Module {
  Predictor() {
    fc1 = register_module("fc1", torch::nn::Linear(kWindow, 32));
    fc2 = register_module("fc2", torch::nn::Linear(32, 1));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

int main() {
  torch::manual_seed(8);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  torch::Tensor train_x, train_y, test_x, test_y;
  make_windows(1024, 0.3, train_x, train_y);
  make_windows(256, 0.3, test_x, test_y);

  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      SeriesDataset(train_x, train_y).map(torch::data::transforms::Stack<>()), 32);

  auto model = std::make_shared<Predictor>();
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(5e-3));

  for (int epoch = 1; epoch <= 8; ++epoch) {
    double total = 0;
    int batches = 0;
    for (auto& batch : *loader) {
      auto x = batch.data.to(device);
      auto y = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
      ++batches;
    }
    std::printf("epoch %d loss %.4f\n", epoch, total / batches);
  }

  // Generation: feed the model its own predictions (plus a little noise).
  {
    torch::NoGradGuard no_grad;
    auto window = test_x[0].clone().to(device);
    std::cout << "generated:";
    for (int step = 0; step < 20; ++step) {
      auto next = model->forward(window.unsqueeze(0)).squeeze() + 0.05 * torch::randn({}, window.options());
      std::printf(" %.3f", next.item<double>());
      window = torch::cat({window.slice(0, 1), next.unsqueeze(0)});
    }
    std::cout << "\n";
  }

  // Probes: four fixed windows.
  {
    torch::NoGradGuard no_grad;
    for (int k = 0; k < 4; ++k) {
      auto probe = test_x[k * 16].unsqueeze(0).to(device);
      std::cout << "probe " << k << " predicted " << model->forward(probe).item<float>() << " expected "
                << test_y[k * 16].item<float>() << "\n";
    }
  }

  // Fine-tuning on a second draw of the series, split by hand across
  // the processes a launcher started: rank r takes batches r, r + world, ...
  const int rank = std::getenv("RANK") ? std::atoi(std::getenv("RANK")) : 0;
  const int world = std::getenv("WORLD_SIZE") ? std::atoi(std::getenv("WORLD_SIZE")) : 1;
  torch::Tensor tune_x, tune_y;
  make_windows(512, 0.3, tune_x, tune_y);
  const int64_t n = tune_x.size(0);
  const int64_t bs = 32;
  for (int epoch = 1; epoch <= 3; ++epoch) {
    double total = 0;
    int batches = 0;
    for (int64_t i = rank * bs; i < n; i += world * bs) {
      auto x = tune_x.slice(0, i, i + bs).to(device);
      auto y = tune_y.slice(0, i, i + bs).to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
      ++batches;
    }
    std::printf("finetune %d loss %.4f\n", epoch, total / batches);
  }

  torch::NoGradGuard no_grad;
  auto test_loss = torch::mse_loss(model->forward(test_x.to(device)), test_y.to(device)).item<double>();
  std::printf("test loss %.4f\n", test_loss);
  return 0;
}
