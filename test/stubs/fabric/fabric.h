// Stand-in for the runtime's <fabric/fabric.h> in rule tests: the API the
// rules emit, declared over the LibTorch stub (see test/stubs/torch/torch.h).
#pragma once

#include <torch/torch.h>

#include <fstream>
#include <functional>
#include <ostream>
#include <string>

namespace fabric {
enum class ReduceOp { Sum, Mean, Max, Min };
template <class T> T to_device(const T& value, const torch::Device& device);
class Options {
 public:
  Options& accelerator(std::string value);
  Options& devices(int count);
  Options& devices(std::string value);
  Options& strategy(std::string value);
  Options& precision(std::string value);
  Options& num_nodes(int count);
};
template <class Dataset, class BatchRequest = std::vector<size_t>> class DataLoader {
 public:
  torch::data::Iterator<typename Dataset::BatchType> begin();
  torch::data::Iterator<typename Dataset::BatchType> end();
};
std::ofstream rank_zero_ofstream(const std::string& path, std::ios::openmode mode = std::ios::out);
class [[nodiscard]] Autocast {
 public:
  ~Autocast();
};
class [[nodiscard]] NoBackwardSync {
 public:
  ~NoBackwardSync();
};
class Fabric {
 public:
  explicit Fabric(Options options = Options());
  void launch();
  torch::Device device() const;
  int global_rank() const;
  int world_size() const;
  bool is_global_zero() const;
  template <class Model, class... Optimizers> void setup(Model& model, Optimizers&... optimizers);
  void setup_optimizer(torch::optim::Optimizer& optimizer);
  void backward(const torch::Tensor& loss, const torch::Tensor& gradient = {},
                c10::optional<bool> retain_graph = c10::nullopt, bool create_graph = false);
  template <class Sampler = torch::data::samplers::RandomSampler, class Dataset>
  std::unique_ptr<DataLoader<Dataset>> setup_dataloader(Dataset dataset, torch::data::DataLoaderOptions options);
  template <class Sampler = torch::data::samplers::RandomSampler, class Dataset>
  std::unique_ptr<DataLoader<Dataset>> setup_dataloader(Dataset dataset, size_t batch_size);
  Autocast autocast();
  template <class Model> NoBackwardSync no_backward_sync(Model& model, bool enabled = true);
  void step(torch::optim::Optimizer& optimizer);
  torch::Tensor step(torch::optim::Optimizer& optimizer, torch::optim::Optimizer::LossClosure closure);
  std::ostream& print();
  int printf(const char* format, ...);
  std::ofstream rank_zero_ofstream(const std::string& path, std::ios::openmode mode = std::ios::out) const;
  torch::Tensor all_reduce(const torch::Tensor& tensor, ReduceOp op = ReduceOp::Mean);
  template <class T> T all_reduce(T value, ReduceOp op = ReduceOp::Mean);
  template <class T> void save(const std::string& path, const T& value);
  template <class T> void load(const std::string& path, T& value);
};
}  // namespace fabric
