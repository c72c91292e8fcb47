// Stand-in for the runtime's <fabric/fabric.h> in rule tests: the API the
// rules emit, declared over the LibTorch stub (see test/stubs/torch/torch.h).
#pragma once

#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

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
FILE* rank_zero_popen(const char* command, const char* mode);
class [[nodiscard]] Autocast {
 public:
  ~Autocast();
};
class [[nodiscard]] NoBackwardSync {
 public:
  ~NoBackwardSync();
};
class [[nodiscard]] PerRankRandom {
 public:
  ~PerRankRandom();
};
template <class T> class ShardRange {
 public:
  const T* begin() const;
  const T* end() const;
};
template <class Container> class ShardElements {
 public:
  template <class C> explicit ShardElements(C&& c);
  auto begin() -> decltype(std::declval<Container&>().begin());
  auto end() -> decltype(std::declval<Container&>().end());
};
template <class T> struct type_identity { using type = T; };
int global_rank();
int world_size();
template <class Index> std::vector<Index> shard(std::vector<Index> indices);
template <class Index> std::vector<Index> shard(std::vector<Index> indices, bool pad);
torch::Tensor shard(const torch::Tensor& order);
torch::Tensor shard(const torch::Tensor& order, bool pad);
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
  template <class T>
  ShardRange<T> shard_range(T begin, typename type_identity<T>::type end, typename type_identity<T>::type step = 1);
  template <class Container> ShardElements<Container> shard_elements(Container&& c);
  template <class RandomIt, class URBG> void shuffle(RandomIt first, RandomIt last, URBG&& g);
  torch::Tensor randperm(int64_t n, torch::TensorOptions options = torch::kLong);
  template <class Index> std::vector<Index> shard(std::vector<Index> indices, bool pad = true);
  torch::Tensor shard(const torch::Tensor& order, bool pad = true);
  PerRankRandom per_rank_random();
  std::ostream& print();
  int printf(const char* format, ...);
  std::ofstream rank_zero_ofstream(const std::string& path, std::ios::openmode mode = std::ios::out) const;
  FILE* rank_zero_popen(const char* command, const char* mode) const;
  torch::Tensor all_reduce(const torch::Tensor& tensor, ReduceOp op = ReduceOp::Mean);
  template <class T> T all_reduce(T value, ReduceOp op = ReduceOp::Mean);
  template <class T> void save(const std::string& path, const T& value);
  template <class T> void load(const std::string& path, T& value);
};
}  // namespace fabric
