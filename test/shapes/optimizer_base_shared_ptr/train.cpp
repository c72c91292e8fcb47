// The optimizer is picked by name at start-up and held through a
// std::shared_ptr to the torch::optim::Optimizer base class.
//
//   usage: train [sgd|adam]      (default: adam)
#include <torch/torch.h>

#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

struct MlpImpl : torch::nn::Module {
  torch::nn::Linear in{nullptr}, mid{nullptr}, out{nullptr};
  MlpImpl() {
    in = register_module("in", torch::nn::Linear(2, 32));
    mid = register_module("mid", torch::nn::Linear(32, 32));
    out = register_module("out", torch::nn::Linear(32, 2));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(in(x));
    x = torch::relu(mid(x));
    return out(x);
  }
};
TORCH_MODULE(Mlp);

// XOR of the signs of the two coordinates, with 10% of the labels flipped.
class XorData : public torch::data::datasets::Dataset<XorData> {
  torch::Tensor x_, y_;

 public:
  explicit XorData(int64_t n) {
    x_ = torch::rand({n, 2}) * 4 - 2;
    y_ = (x_.select(1, 0) * x_.select(1, 1) > 0).to(torch::kInt64);
    auto flip = (torch::rand({n}) < 0.1).to(torch::kInt64);
    y_ = y_.bitwise_xor(flip);
  }
  torch::data::Example<> get(size_t i) override { return {x_[i], y_[i]}; }
  torch::optional<size_t> size() const override { return x_.size(0); }
};

int main(int argc, char* argv[]) {
  const std::string opt_name = argc > 1 ? argv[1] : "adam";
  torch::manual_seed(17);

  torch::Device device(torch::kCPU);
  if (torch::cuda::is_available()) {
    device = torch::Device(torch::kCUDA);
  }

  Mlp net;
  net->to(device);

  std::shared_ptr<torch::optim::Optimizer> optimizer;
  if (opt_name == "sgd") {
    optimizer = std::make_shared<torch::optim::SGD>(
        net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  } else if (opt_name == "adam") {
    optimizer = std::make_shared<torch::optim::Adam>(net->parameters(),
                                                     torch::optim::AdamOptions(5e-3));
  } else {
    std::cerr << "unknown optimizer '" << opt_name << "'\n";
    return 1;
  }
  std::cout << "optimizer: " << opt_name << "\n";

  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      XorData(2048).map(torch::data::transforms::Stack<>()), 64);
  auto test_loader = torch::data::make_data_loader(
      XorData(512).map(torch::data::transforms::Stack<>()), 128);

  for (int epoch = 1; epoch <= 15; ++epoch) {
    net->train();
    double loss_total = 0;
    int batches = 0;
    for (auto& batch : *loader) {
      auto inputs = batch.data.to(device), labels = batch.target.to(device);
      optimizer->zero_grad();
      auto loss = torch::nn::functional::cross_entropy(net(inputs), labels);
      loss.backward();
      optimizer->step();
      loss_total += loss.item<double>();
      ++batches;
    }
    std::cout << "epoch " << epoch << " loss " << loss_total / batches << std::endl;
  }

  net->eval();
  torch::NoGradGuard no_grad;
  double test_loss = 0;
  int64_t correct = 0, count = 0;
  for (auto& batch : *test_loader) {
    auto inputs = batch.data.to(device), labels = batch.target.to(device);
    auto logits = net(inputs);
    test_loss += torch::nn::functional::cross_entropy(
                     logits, labels,
                     torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                     .item<double>();
    correct += (logits.argmax(1) == labels).sum().item<int64_t>();
    count += labels.numel();
  }
  std::cout << "test loss " << test_loss / count << " acc " << double(correct) / count << std::endl;
  return 0;
}
