// A research trainer that resumes the way LibTorch code does it: its
// load_checkpoint() reads torch::serialize::InputArchive files and calls
// the module's and the optimizer's own load(), after the trainer (and so,
// once migrated, fabric.setup) has built them. The first run trains and
// checkpoints; a second Trainer, built afresh, resumes from the files.
#include <torch/torch.h>

#include <iostream>
#include <memory>
#include <string>

struct NoisyPlane : torch::data::Dataset<NoisyPlane> {
  explicit NoisyPlane(int64_t count) {
    inputs_ = torch::randn({count, 8});
    auto weights = torch::linspace(-1.0, 1.0, 8).unsqueeze(1);
    targets_ = inputs_.matmul(weights) + 0.3 * torch::randn({count, 1});
  }
  torch::data::Example<> get(size_t index) override { return {inputs_[index], targets_[index]}; }
  torch::optional<size_t> size() const override { return inputs_.size(0); }

  torch::Tensor inputs_;
  torch::Tensor targets_;
};

struct RegressorImpl : torch::nn::Module {
  RegressorImpl()
      : hidden(register_module("hidden", torch::nn::Linear(8, 32))),
        out(register_module("out", torch::nn::Linear(32, 1))) {}
  torch::Tensor forward(const torch::Tensor& x) { return out(torch::tanh(hidden(x))); }
  torch::nn::Linear hidden;
  torch::nn::Linear out;
};
TORCH_MODULE(Regressor);

class Trainer {
 public:
  explicit Trainer(torch::Device device) : device_(device) {
    model_->to(device_);
    optimizer_ = std::make_unique<torch::optim::Adam>(model_->parameters(), torch::optim::AdamOptions(5e-3));
  }

  void save_checkpoint(const std::string& prefix) {
    torch::serialize::OutputArchive model_archive;
    model_->save(model_archive);
    model_archive.save_to(prefix + "_model.pt");
    torch::serialize::OutputArchive optimizer_archive;
    optimizer_->save(optimizer_archive);
    optimizer_archive.save_to(prefix + "_optimizer.pt");
  }

  void load_checkpoint(const std::string& prefix) {
    torch::serialize::InputArchive model_archive;
    model_archive.load_from(prefix + "_model.pt");
    model_->load(model_archive);
    torch::serialize::InputArchive optimizer_archive;
    optimizer_archive.load_from(prefix + "_optimizer.pt");
    optimizer_->load(optimizer_archive);
  }

  template <typename Loader>
  void fit(Loader& loader, int first_epoch, int last_epoch) {
    for (int epoch = first_epoch; epoch <= last_epoch; ++epoch) {
      model_->train();
      double total = 0;
      int64_t batches = 0;
      for (auto& batch : loader) {
        torch::Tensor x = batch.data.to(device_);
        torch::Tensor y = batch.target.to(device_);
        optimizer_->zero_grad();
        torch::Tensor loss = torch::mse_loss(model_->forward(x), y);
        loss.backward();
        optimizer_->step();
        total += loss.item<double>();
        ++batches;
      }
      std::cout << "epoch " << epoch << " loss " << total / batches << std::endl;
    }
  }

  double evaluate(const torch::Tensor& x, const torch::Tensor& y) {
    torch::NoGradGuard no_grad;
    model_->eval();
    return torch::mse_loss(model_->forward(x.to(device_)), y.to(device_)).item<double>();
  }

 private:
  torch::Device device_;
  Regressor model_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
};

int main() {
  torch::manual_seed(3141);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      NoisyPlane(1024).map(torch::data::transforms::Stack<>()), torch::data::DataLoaderOptions().batch_size(32));
  NoisyPlane test(256);

  Trainer first(device);
  first.fit(*loader, 1, 4);
  first.save_checkpoint("run");

  // A new process would start here: a fresh trainer, resumed from the files.
  Trainer resumed(device);
  resumed.load_checkpoint("run");
  resumed.fit(*loader, 5, 8);
  std::cout << "test loss " << resumed.evaluate(test.inputs_, test.targets_) << std::endl;
  return 0;
}
