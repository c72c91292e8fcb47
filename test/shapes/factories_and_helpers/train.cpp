// A factory-built Sequential, an optimizer made by a factory that is handed
// the model (held behind the base class), a TensorDataset of rows unpacked by
// hand, a manual learning-rate decay over param_groups, a CSV log, and a
// checkpoint helper called from the loop.
#include <torch/torch.h>
#include <fstream>
#include <iostream>
#include <memory>

torch::nn::Sequential make_model(int in, int hidden) {
  return torch::nn::Sequential(torch::nn::Linear(in, hidden), torch::nn::ReLU(),
                               torch::nn::Linear(hidden, hidden), torch::nn::ReLU(),
                               torch::nn::Linear(hidden, 2));
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(torch::nn::Sequential& model, double lr) {
  return std::make_unique<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(lr));
}

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups())
    static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
}

void checkpoint(const torch::nn::Sequential& model, int epoch) {
  torch::save(model, "epoch" + std::to_string(epoch) + ".pt");
}

int main() {
  torch::manual_seed(3);
  auto device = torch::cuda::is_available() ? torch::Device("cuda:0") : torch::Device("cpu");
  auto x = torch::randn({2048, 8});
  auto labels = (x.narrow(1, 0, 2).sum(1) > 0).to(torch::kLong);
  auto flip = torch::rand({2048}) < 0.1;
  labels = torch::where(flip, 1 - labels, labels);
  auto dataset = torch::data::datasets::TensorDataset(torch::cat({x, labels.unsqueeze(1).to(torch::kFloat)}, 1));
  auto loader = torch::data::make_data_loader(
      std::move(dataset), torch::data::DataLoaderOptions().batch_size(64));

  auto model = make_model(8, 32);
  model->to(device);
  auto optimizer = make_optimizer(model, 3e-3);
  std::ofstream log("loss.csv");
  log << "epoch,loss\n";
  double lr = 3e-3;
  for (int epoch = 0; epoch < 5; ++epoch) {
    double sum = 0;
    int64_t seen = 0, hits = 0;
    for (auto& batch : *loader) {
      auto rows = torch::stack(std::vector<torch::Tensor>(batch.begin(), batch.end())).to(device);
      auto data = rows.narrow(1, 0, 8);
      auto target = rows.select(1, 8).to(torch::kLong);
      optimizer->zero_grad();
      auto output = model->forward(data);
      auto loss = torch::cross_entropy_loss(output, target);
      loss.backward();
      optimizer->step();
      sum += loss.item<double>() * data.size(0);
      seen += data.size(0);
      hits += output.argmax(1).eq(target).sum().item<int64_t>();
    }
    lr *= 0.7;
    set_lr(*optimizer, lr);
    std::cout << "epoch " << epoch << " loss " << sum / seen << " acc " << double(hits) / seen << "\n";
    log << epoch << "," << sum / seen << "\n";
    if (epoch % 2 == 1) checkpoint(model, epoch);
  }
  torch::NoGradGuard no_grad;
  auto test_x = torch::randn({512, 8});
  auto test_labels = (test_x.narrow(1, 0, 2).sum(1) > 0).to(torch::kLong);
  auto test_output = model->forward(test_x.to(device));
  auto test_loss = torch::cross_entropy_loss(test_output, test_labels.to(device)).item<double>();
  auto test_acc = test_output.argmax(1).eq(test_labels.to(device)).to(torch::kFloat).mean().item<double>();
  std::cout << "test loss " << test_loss << " acc " << test_acc << std::endl;
}
