// Structured like pytorch/examples cpp/mnist/mnist.cpp, with the MNIST files
// replaced by a synthetic 8x8 "digits" set so it runs anywhere.
#include <torch/torch.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

// The batch size for training.
const int64_t kTrainBatchSize = 64;

// The batch size for testing.
const int64_t kTestBatchSize = 128;

// The number of epochs to train.
const int64_t kNumberOfEpochs = 10;

// Ten digit "templates" blurred with noise; about 10% of the labels are wrong,
// like a badly annotated data set.
class SyntheticDigits : public torch::data::datasets::Dataset<SyntheticDigits> {
 public:
  SyntheticDigits(const torch::Tensor& templates, int64_t count) {
    targets_ = torch::randint(0, 10, {count}, torch::kLong);
    images_ = torch::sigmoid(templates.index_select(0, targets_) +
                             0.7 * torch::randn({count, 1, 8, 8}));
    auto flip = torch::rand({count}) < 0.1;
    targets_ = torch::where(flip, torch::randint(0, 10, {count}, torch::kLong), targets_);
  }

  torch::data::Example<> get(size_t index) override {
    return {images_[index], targets_[index]};
  }

  torch::optional<size_t> size() const override {
    return targets_.size(0);
  }

 private:
  torch::Tensor images_, targets_;
};

struct Net : torch::nn::Module {
  Net()
      : conv1(torch::nn::Conv2dOptions(1, 10, /*kernel_size=*/3).padding(1)),
        conv2(torch::nn::Conv2dOptions(10, 20, /*kernel_size=*/3).padding(1)),
        fc1(80, 50),
        fc2(50, 10) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv2_drop", conv2_drop);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1->forward(x), 2));
    x = torch::relu(
        torch::max_pool2d(conv2_drop->forward(conv2->forward(x)), 2));
    x = x.view({-1, 80});
    x = torch::relu(fc1->forward(x));
    x = torch::dropout(x, /*p=*/0.2, /*training=*/is_training());
    x = fc2->forward(x);
    return torch::log_softmax(x, /*dim=*/1);
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::Dropout2d conv2_drop;
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
};

template <typename DataLoader>
void train(
    size_t epoch,
    Net& model,
    torch::Device device,
    DataLoader& data_loader,
    torch::optim::Optimizer& optimizer,
    size_t dataset_size) {
  model.train();
  size_t batch_idx = 0;
  double epoch_loss = 0;
  for (auto& batch : data_loader) {
    auto data = batch.data.to(device), targets = batch.target.to(device);
    optimizer.zero_grad();
    auto output = model.forward(data);
    auto loss = torch::nll_loss(output, targets);
    AT_ASSERT(!std::isnan(loss.template item<float>()));
    loss.backward();
    optimizer.step();

    epoch_loss += loss.template item<float>();
    batch_idx++;
  }
  std::printf("epoch %zu loss %.4f\n", epoch, epoch_loss / batch_idx);
}

template <typename DataLoader>
void test(
    Net& model,
    torch::Device device,
    DataLoader& data_loader,
    size_t dataset_size) {
  torch::NoGradGuard no_grad;
  model.eval();
  double test_loss = 0;
  int32_t correct = 0;
  for (const auto& batch : data_loader) {
    auto data = batch.data.to(device), targets = batch.target.to(device);
    auto output = model.forward(data);
    test_loss += torch::nll_loss(
                     output,
                     targets,
                     /*weight=*/{},
                     torch::Reduction::Sum)
                     .template item<float>();
    auto pred = output.argmax(1);
    correct += pred.eq(targets).sum().template item<int64_t>();
  }

  test_loss /= dataset_size;
  std::printf(
      "test loss %.4f acc %.3f\n",
      test_loss,
      static_cast<double>(correct) / dataset_size);
}

auto main() -> int {
  torch::manual_seed(1);

  torch::DeviceType device_type;
  if (torch::cuda::is_available()) {
    std::cout << "CUDA available! Training on GPU." << std::endl;
    device_type = torch::kCUDA;
  } else {
    std::cout << "Training on CPU." << std::endl;
    device_type = torch::kCPU;
  }
  torch::Device device(device_type);

  Net model;
  model.to(device);

  auto templates = 2 * torch::randn({10, 1, 8, 8});

  auto train_dataset = SyntheticDigits(templates, 1024)
                           .map(torch::data::transforms::Normalize<>(0.5, 0.3))
                           .map(torch::data::transforms::Stack<>());
  const size_t train_dataset_size = train_dataset.size().value();
  auto train_loader =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
          std::move(train_dataset), kTrainBatchSize);

  auto test_dataset = SyntheticDigits(templates, 256)
                          .map(torch::data::transforms::Normalize<>(0.5, 0.3))
                          .map(torch::data::transforms::Stack<>());
  const size_t test_dataset_size = test_dataset.size().value();
  auto test_loader =
      torch::data::make_data_loader(std::move(test_dataset), kTestBatchSize);

  torch::optim::SGD optimizer(
      model.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));

  for (size_t epoch = 1; epoch <= kNumberOfEpochs; ++epoch) {
    train(epoch, model, device, *train_loader, optimizer, train_dataset_size);
    test(model, device, *test_loader, test_dataset_size);
  }
}
