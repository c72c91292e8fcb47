// Residual MLP regression, gradient accumulation, clipping, RMSprop, an
// epoch loop inside a lambda, and an archive checkpoint.
#include <torch/torch.h>
#include <cstdio>
#include <iostream>

struct BlockStackImpl : torch::nn::Module {
  torch::nn::ModuleList blocks;
  torch::nn::Linear head{nullptr};
  explicit BlockStackImpl(int width, int depth) {
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int i = 0; i < depth; ++i) blocks->push_back(torch::nn::Linear(width, width));
    head = register_module("head", torch::nn::Linear(width, 1));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (const auto& block : *blocks) x = x + torch::tanh(block->as<torch::nn::Linear>()->forward(x));
    return head(x);
  }
};
TORCH_MODULE(BlockStack);

class PairDataset : public torch::data::datasets::Dataset<PairDataset> {
 public:
  PairDataset(torch::Tensor x, torch::Tensor y) : x_(std::move(x)), y_(std::move(y)) {}
  torch::data::Example<> get(size_t i) override { return {x_[i], y_[i]}; }
  torch::optional<size_t> size() const override { return x_.size(0); }
 private:
  torch::Tensor x_, y_;
};

int main() {
  torch::manual_seed(7);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  const int width = 16;
  auto x = torch::randn({1024, width});
  auto y = x.sum(1, true).sin() + 0.3 * torch::randn({1024, 1});
  auto test_x = torch::randn({256, width});
  auto test_y = test_x.sum(1, true).sin() + 0.3 * torch::randn({256, 1});

  BlockStack net(width, 3);
  net->to(device);
  torch::optim::RMSprop optimizer(net->parameters(), torch::optim::RMSpropOptions(1e-3));
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      PairDataset(x, y).map(torch::data::transforms::Stack<>()), 32);
  const int accumulate = 2;

  auto run_epoch = [&](int epoch) {
    net->train();
    double total = 0;
    int batches = 0;
    optimizer.zero_grad();
    for (auto& batch : *loader) {
      auto data = batch.data.to(device), target = batch.target.to(device);
      auto loss = torch::mse_loss(net->forward(data), target);
      (loss / accumulate).backward();
      if (++batches % accumulate == 0) {
        torch::nn::utils::clip_grad_norm_(net->parameters(), 1.0);
        optimizer.step();
        optimizer.zero_grad();
      }
      total += loss.item<double>();
    }
    std::printf("epoch %d loss %.4f\n", epoch, total / batches);
  };
  for (int epoch = 1; epoch <= 6; ++epoch) run_epoch(epoch);

  torch::NoGradGuard no_grad;
  net->eval();
  auto test_loss = torch::mse_loss(net->forward(test_x.to(device)), test_y.to(device)).item<double>();
  std::cout << "test loss " << test_loss << std::endl;
  torch::serialize::OutputArchive archive;
  net->save(archive);
  archive.save_to("blocks.pt");
}
