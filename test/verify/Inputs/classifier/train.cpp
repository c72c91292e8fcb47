// A single-device LibTorch program, as users write them: a small classifier
// on two Gaussian blobs, an epoch loss and accuracy on the console, and a
// CSV log of the epochs. fabricize verify's tests migrate it correctly (the
// migration is equivalent) and compare it with broken migrations of it
// (test/verify/Inputs/broken/*).
#include <torch/torch.h>

#include <fstream>
#include <iostream>

struct Blobs : torch::data::datasets::Dataset<Blobs> {
  torch::Tensor x, y;
  explicit Blobs(int64_t n) {
    auto gen = torch::make_generator<torch::CPUGeneratorImpl>(7);
    y = torch::randint(0, 2, {n}, gen);
    x = torch::randn({n, 4}, gen) + (y.unsqueeze(1).to(torch::kFloat) * 2 - 1);
  }
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  torch::optional<size_t> size() const override { return x.size(0); }
};

int main() {
  torch::manual_seed(1);
  torch::nn::Sequential model(torch::nn::Linear(4, 16), torch::nn::ReLU(), torch::nn::Linear(16, 2));
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));

  Blobs train_set(512);
  const double size = static_cast<double>(*train_set.size());
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      train_set.map(torch::data::transforms::Stack<>()), 32);

  std::ofstream log("train_log.csv");
  for (int epoch = 0; epoch < 20; ++epoch) {
    double correct = 0, total_loss = 0;
    int64_t batches = 0;
    for (auto& batch : *loader) {
      optimizer.zero_grad();
      auto output = model->forward(batch.data);
      auto loss = torch::cross_entropy_loss(output, batch.target);
      loss.backward();
      optimizer.step();
      correct += output.argmax(1).eq(batch.target).sum().item<double>();
      total_loss += loss.item<double>();
      ++batches;
    }
    std::cout << "epoch " << epoch << " loss " << total_loss / batches << " acc " << correct / size
              << std::endl;
    log << epoch << "," << total_loss / batches << "\n";
  }
  return 0;
}
