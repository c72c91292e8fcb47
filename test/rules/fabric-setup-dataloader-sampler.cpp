// make_data_loader<Dataset, Sampler>(dataset, sampler, options) (issue 39):
// a RandomSampler or SequentialSampler object built over the data set's
// size is the sampler fabric.setup_dataloader builds (distributed on several
// ranks): migrated, the object no longer passed. One of a size written as a
// number may cover part of the data: reported, and where its loader is
// stored (a member through an alias) keeps the type the call returns, so
// the tree still builds.
// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: FileCheck %s --input-file=%t.err --check-prefix=MSG --implicit-check-not='[fabric-setup-dataloader]'
// RUN: %migrate %t.cpp -- %flags > %t2.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t2.cpp
#include <torch/torch.h>

#include <memory>

class Pairs : public torch::data::datasets::Dataset<Pairs> {
 public:
  torch::data::Example<> get(size_t i) override;
  torch::optional<size_t> size() const override;
};
using TrainSet = torch::data::datasets::MapDataset<Pairs, torch::data::transforms::Stack<>>;
// CHECK: {{^}}using PartLoader = torch::data::StatelessDataLoader<TrainSet, torch::data::samplers::RandomSampler>;
using PartLoader = torch::data::StatelessDataLoader<TrainSet, torch::data::samplers::RandomSampler>;

class Trainer {
 public:
  Trainer() : model_(4, 1), optimizer_(model_->parameters(), torch::optim::SGDOptions(0.1)) {}
  void prepare() {
    auto dataset = Pairs().map(torch::data::transforms::Stack<>());
    const size_t size = *dataset.size();
    torch::data::samplers::RandomSampler sampler(size);
    // CHECK: {{^}}    whole_ = fabric_.setup_dataloader<torch::data::samplers::RandomSampler>(std::move(dataset), torch::data::DataLoaderOptions(32));
    whole_ = torch::data::make_data_loader<TrainSet, torch::data::samplers::RandomSampler>(
        std::move(dataset), std::move(sampler), torch::data::DataLoaderOptions(32));
    // MSG: fabric-setup-dataloader-sampler.cpp:[[@LINE+2]]:13: warning: data loader with an explicit sampler object: not migrated{{.*}}[fabric-setup-dataloader]
    // CHECK: {{^}}    part_ = torch::data::make_data_loader<TrainSet, torch::data::samplers::RandomSampler>(
    part_ = torch::data::make_data_loader<TrainSet, torch::data::samplers::RandomSampler>(
        Pairs().map(torch::data::transforms::Stack<>()), torch::data::samplers::RandomSampler(64),
        torch::data::DataLoaderOptions(32));
  }
  void fit() {
    for (auto& batch : *whole_) {
      optimizer_.zero_grad();
      auto loss = torch::mse_loss(model_->forward(batch.data), batch.target);
      loss.backward();
      optimizer_.step();
    }
  }

 private:
  torch::nn::Linear model_;
  torch::optim::SGD optimizer_;
  // CHECK: {{^}}  std::unique_ptr<fabric::DataLoader<TrainSet>> whole_;
  std::unique_ptr<torch::data::StatelessDataLoader<TrainSet, torch::data::samplers::RandomSampler>> whole_;
  // CHECK: {{^}}  std::unique_ptr<PartLoader> part_;
  std::unique_ptr<PartLoader> part_;
};

int main() {
  Trainer trainer;
  trainer.prepare();
  trainer.fit();
  return 0;
}
