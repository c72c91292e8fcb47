// RUN: %migrate %s -- %flags > %t.cpp 2> %t.err; test $? -eq 1
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: FileCheck %s --input-file=%t.err --check-prefix=MSG --implicit-check-not='[fabric-setup-dataloader]'
// RUN: %migrate %t.cpp -- %flags > %t2.cpp 2> /dev/null; test $? -eq 1
// RUN: diff -u %t.cpp %t2.cpp
#include <torch/torch.h>

class Pairs : public torch::data::datasets::Dataset<Pairs> {
 public:
  torch::data::Example<> get(size_t i) override;
  torch::optional<size_t> size() const override;
};

// In code nothing calls: untouched, and a warning that it does not run.
// MSG: fabric-setup-dataloader.cpp:[[@LINE+3]]:17: warning: not migrated {{.*}}nothing in the project calls `evaluate`; it does not run in this program{{.*}}[fabric-setup-dataloader]
// CHECK: {{^  }}auto loader = torch::data::make_data_loader(Pairs(), 4);
void evaluate() {
  auto loader = torch::data::make_data_loader(Pairs(), 4);
}

// Every form: explicit sampler type, options or a batch size, a mapped set.
// CHECK: {{^  }}auto train = fabric.setup_dataloader<torch::data::samplers::RandomSampler>(
// CHECK-NEXT: {{^      }}Pairs().map(torch::data::transforms::Stack<>()), torch::data::DataLoaderOptions().batch_size(64));
// CHECK-NEXT: {{^  }}auto val = fabric.setup_dataloader<torch::data::samplers::SequentialSampler>(Pairs(), 128);
// CHECK-NEXT: {{^  }}auto plain = fabric.setup_dataloader(Pairs(), 32);
// A sampler object the user built is reported, not rewritten.
// CHECK-NEXT: {{^  }}auto custom = torch::data::make_data_loader(Pairs(), torch::data::samplers::SequentialSampler(10), torch::data::DataLoaderOptions());
// MSG: fabric-setup-dataloader.cpp:[[@LINE+6]]:17: warning: data loader with an explicit sampler object: not migrated{{.*}}[fabric-setup-dataloader]
int main() {
  auto train = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Pairs().map(torch::data::transforms::Stack<>()), torch::data::DataLoaderOptions().batch_size(64));
  auto val = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(Pairs(), 128);
  auto plain = torch::data::make_data_loader(Pairs(), 32);
  auto custom = torch::data::make_data_loader(Pairs(), torch::data::samplers::SequentialSampler(10), torch::data::DataLoaderOptions());
  return 0;
}

// The loader's type spelled by the program (a member assigned in a
// prepare_data(), an alias, a parameter, through `using namespace`) follows
// the migration; a sampler the Fabric does not take over keeps it.
using TrainSet = torch::data::datasets::MapDataset<Pairs, torch::data::transforms::Stack<>>;
// CHECK: {{^}}using TrainLoader = fabric::DataLoader<TrainSet>;
using TrainLoader = torch::data::StatelessDataLoader<TrainSet, torch::data::samplers::RandomSampler>;
struct CustomSampler : torch::data::samplers::Sampler {};
// CHECK: {{^}}using CustomLoader = torch::data::StatelessDataLoader<TrainSet, CustomSampler>;
using CustomLoader = torch::data::StatelessDataLoader<TrainSet, CustomSampler>;

class Trainer {
 public:
  void prepare_data();
  // CHECK: {{^}}  double evaluate(fabric::DataLoader<Pairs>& loader);
  double evaluate(torch::data::StatelessDataLoader<Pairs, torch::data::samplers::SequentialSampler>& loader);

 private:
  // CHECK: {{^}}  std::unique_ptr<TrainLoader> train_loader_;
  std::unique_ptr<TrainLoader> train_loader_;
  // CHECK: {{^}}  std::unique_ptr<fabric::DataLoader<Pairs>> val_loader_;
  std::unique_ptr<torch::data::StatelessDataLoader<Pairs, torch::data::samplers::SequentialSampler>> val_loader_;
};

namespace spelled_short {
using namespace torch::data;
// CHECK: {{^}}using ShortLoader = fabric::DataLoader<Pairs>;
using ShortLoader = StatelessDataLoader<Pairs, samplers::RandomSampler>;
}  // namespace spelled_short
