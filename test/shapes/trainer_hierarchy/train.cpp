// A trainer class hierarchy, the way research code bases organise tasks: a
// BaseTrainer owns the model (a shared_ptr to an abstract model class) and
// makes the optimizer through a factory of its own; fit() calls the virtual
// train_epoch() and evaluate() that each task overrides. The classifier
// has a constructor of its own; the regressor inherits the base's.
#include <torch/torch.h>

#include <iostream>
#include <memory>
#include <string>

struct BaseModel : torch::nn::Module {
  virtual torch::Tensor forward(torch::Tensor x) = 0;
};

struct Mlp : BaseModel {
  Mlp(int64_t inputs, int64_t outputs)
      : fc1(register_module("fc1", torch::nn::Linear(inputs, 32))),
        fc2(register_module("fc2", torch::nn::Linear(32, outputs))) {}
  torch::Tensor forward(torch::Tensor x) override { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};

struct Table : torch::data::datasets::Dataset<Table> {
  Table(torch::Tensor x, torch::Tensor y) : x_(std::move(x)), y_(std::move(y)) {}
  torch::data::Example<> get(size_t i) override { return {x_[i], y_[i]}; }
  torch::optional<size_t> size() const override { return x_.size(0); }
  torch::Tensor x_, y_;
};

class BaseTrainer {
 public:
  BaseTrainer(std::shared_ptr<BaseModel> model, Table train, Table test, double lr, torch::Device device)
      : model_(std::move(model)), train_(std::move(train)), test_(std::move(test)), device_(device) {
    model_->to(device_);
    optimizer_ = make_optimizer(lr);
  }
  virtual ~BaseTrainer() = default;

  void fit(int epochs, const std::string& task) {
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      double loss = train_epoch();
      double metric = evaluate();
      std::cout << task << " epoch " << epoch << " loss " << loss << " " << metric_name() << " " << metric
                << std::endl;
    }
  }

 protected:
  virtual double train_epoch() = 0;
  virtual double evaluate() = 0;
  virtual std::string metric_name() const = 0;

  std::unique_ptr<torch::optim::Optimizer> make_optimizer(double lr) {
    return std::make_unique<torch::optim::Adam>(model_->parameters(), torch::optim::AdamOptions(lr));
  }

  std::shared_ptr<BaseModel> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  Table train_, test_;
  torch::Device device_;
};

class ClassificationTrainer : public BaseTrainer {
 public:
  ClassificationTrainer(std::shared_ptr<BaseModel> model, Table train, Table test, torch::Device device)
      : BaseTrainer(std::move(model), std::move(train), std::move(test), 1e-2, device) {}

 protected:
  double train_epoch() override {
    model_->train();
    auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
        train_.map(torch::data::transforms::Stack<>()), torch::data::DataLoaderOptions(32));
    double total = 0;
    int64_t batches = 0;
    for (auto& batch : *loader) {
      auto x = batch.data.to(device_);
      auto y = batch.target.to(device_);
      optimizer_->zero_grad();
      auto loss = torch::nn::functional::cross_entropy(model_->forward(x), y);
      loss.backward();
      optimizer_->step();
      total += loss.item<double>();
      ++batches;
    }
    return total / batches;
  }
  double evaluate() override {
    torch::NoGradGuard no_grad;
    model_->eval();
    auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
        test_.map(torch::data::transforms::Stack<>()), torch::data::DataLoaderOptions(50));
    int64_t correct = 0;
    for (auto& batch : *loader) {
      auto predicted = model_->forward(batch.data.to(device_)).argmax(1);
      correct += predicted.eq(batch.target.to(device_)).sum().item<int64_t>();
    }
    return static_cast<double>(correct) / static_cast<double>(*test_.size());
  }
  std::string metric_name() const override { return "val_acc"; }
};

class RegressionTrainer : public BaseTrainer {
 public:
  using BaseTrainer::BaseTrainer;

 protected:
  double train_epoch() override {
    model_->train();
    auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
        train_.map(torch::data::transforms::Stack<>()), torch::data::DataLoaderOptions(32));
    double total = 0;
    int64_t batches = 0;
    for (auto& batch : *loader) {
      optimizer_->zero_grad();
      auto loss = torch::mse_loss(model_->forward(batch.data.to(device_)), batch.target.to(device_));
      loss.backward();
      optimizer_->step();
      total += loss.item<double>();
      ++batches;
    }
    return total / batches;
  }
  double evaluate() override {
    torch::NoGradGuard no_grad;
    model_->eval();
    auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
        test_.map(torch::data::transforms::Stack<>()), torch::data::DataLoaderOptions(50));
    double squared = 0;
    for (auto& batch : *loader) {
      auto error = model_->forward(batch.data.to(device_)) - batch.target.to(device_);
      squared += error.pow(2).sum().item<double>();
    }
    return squared / static_cast<double>(*test_.size());
  }
  std::string metric_name() const override { return "val_loss"; }
};

Table blobs(int64_t count) {
  auto labels = torch::arange(count) % 3;
  auto centers = torch::tensor({{0.0f, 2.0f}, {-1.8f, -1.0f}, {1.8f, -1.0f}});
  return Table(centers.index_select(0, labels) + 0.9 * torch::randn({count, 2}), labels);
}

Table wave(int64_t count) {
  auto x = torch::rand({count, 2}) * 4 - 2;
  auto y = torch::sin(x.select(1, 0)).unsqueeze(1) + 0.3 * x.select(1, 1).unsqueeze(1);
  return Table(x, y + 0.05 * torch::randn({count, 1}));
}

int main(int argc, char** argv) {
  torch::manual_seed(7);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  const int epochs = argc > 1 ? std::stoi(argv[1]) : 6;
  std::unique_ptr<BaseTrainer> classifier =
      std::make_unique<ClassificationTrainer>(std::make_shared<Mlp>(2, 3), blobs(960), blobs(300), device);
  classifier->fit(epochs, "classify");
  RegressionTrainer regressor(std::make_shared<Mlp>(2, 1), wave(960), wave(300), 5e-3, device);
  regressor.fit(epochs, "regress");
  return 0;
}
