// A small stand-in for <torch/torch.h>: the declarations the rules match,
// with LibTorch 1.13's names, namespaces and overload shapes, so a rule test
// parses in milliseconds instead of the ~15 s the real header costs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace c10 {
enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };
constexpr DeviceType kCPU = DeviceType::CPU;
constexpr DeviceType kCUDA = DeviceType::CUDA;
struct Device {
  /* implicit */ Device(DeviceType type, int8_t index = -1);
  /* implicit */ Device(const std::string& device_string);
  /* implicit */ Device(const char* device_string);
  DeviceType type() const;
  bool is_cuda() const;
};
enum class ScalarType : int8_t { Float, Double, Half, BFloat16, Long };
constexpr ScalarType kFloat = ScalarType::Float;
constexpr ScalarType kDouble = ScalarType::Double;
constexpr ScalarType kHalf = ScalarType::Half;
constexpr ScalarType kBFloat16 = ScalarType::BFloat16;
constexpr ScalarType kLong = ScalarType::Long;
template <class T> using optional = std::optional<T>;
constexpr std::nullopt_t nullopt = std::nullopt;
}  // namespace c10

namespace at {
using c10::Device;
using c10::DeviceType;
using c10::ScalarType;
struct TensorOptions {
  TensorOptions();
  /* implicit */ TensorOptions(Device device);
  /* implicit */ TensorOptions(DeviceType type);
  /* implicit */ TensorOptions(ScalarType dtype);
  TensorOptions device(Device d) const;
  TensorOptions dtype(ScalarType t) const;
};
class TensorBase {
 public:
  Device device() const;
  int64_t size(int64_t dim) const;
  int64_t numel() const;
  int64_t dim() const;
};
class Tensor : public TensorBase {
 public:
  Tensor();
  Tensor to(TensorOptions options = {}, bool non_blocking = false, bool copy = false) const;
  Tensor to(Device device, ScalarType dtype, bool non_blocking = false, bool copy = false) const;
  Tensor to(ScalarType dtype, bool non_blocking = false, bool copy = false) const;
  Tensor to(const Tensor& other, bool non_blocking = false, bool copy = false) const;
  Tensor cuda() const;
  Tensor cpu() const;
  void backward(const Tensor& gradient = {}, c10::optional<bool> retain_graph = c10::nullopt,
                bool create_graph = false) const;
  template <class T> T item() const;
  Tensor view(std::vector<int64_t> shape) const;
  Tensor sum() const;
  Tensor mean() const;
  Tensor argmax(int64_t dim) const;
  Tensor eq(const Tensor& other) const;
  Tensor operator[](int64_t index) const;
  Tensor& operator+=(const Tensor& other);
  Tensor detach() const;
  Tensor& requires_grad_(bool requires_grad = true);
  Tensor slice(int64_t dim, int64_t start, int64_t end) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor index(std::vector<Tensor> indices) const;
  Tensor pow(double exponent) const;
  Tensor& normal_(double mean = 0, double std = 1);
  Tensor& uniform_(double from = 0, double to = 1);
  Tensor multinomial(int64_t num_samples, bool replacement = false) const;
};
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
}  // namespace at

namespace torch {
using at::Tensor;
using at::TensorOptions;
using c10::Device;
using c10::DeviceType;
using c10::ScalarType;
using c10::kCPU;
using c10::kCUDA;
using c10::kFloat;
using c10::kDouble;
using c10::kHalf;
using c10::kBFloat16;
using c10::kLong;
template <class T> using optional = c10::optional<T>;
struct NoGradGuard {
  NoGradGuard();
  ~NoGradGuard();
};

Tensor randn(std::vector<int64_t> shape, TensorOptions options = {});
Tensor rand(std::vector<int64_t> shape, TensorOptions options = {});
Tensor randint(int64_t high, std::vector<int64_t> shape, TensorOptions options = {});
Tensor randint(int64_t low, int64_t high, std::vector<int64_t> shape, TensorOptions options = {});
Tensor randperm(int64_t n, TensorOptions options = {});
Tensor arange(int64_t end, TensorOptions options = {});
Tensor multinomial(const Tensor& self, int64_t num_samples, bool replacement = false);
Tensor stack(std::vector<Tensor> tensors, int64_t dim = 0);
Tensor cat(std::vector<Tensor> tensors, int64_t dim = 0);
Tensor tensor(std::vector<int64_t> values, TensorOptions options = {});
Tensor zeros(std::vector<int64_t> shape, TensorOptions options = {});
Tensor ones(std::vector<int64_t> shape, TensorOptions options = {});
Tensor full(std::vector<int64_t> shape, double value, TensorOptions options = {});
Tensor softmax(const Tensor& self, int64_t dim);
Tensor mse_loss(const Tensor& input, const Tensor& target);
Tensor nll_loss(const Tensor& input, const Tensor& target);
void manual_seed(uint64_t seed);

namespace cuda {
bool is_available();
int device_count();
}  // namespace cuda

namespace autograd {
using variable_list = std::vector<Tensor>;
void backward(const variable_list& tensors, const variable_list& grad_tensors = {},
              c10::optional<bool> retain_graph = c10::nullopt, bool create_graph = false,
              const variable_list& inputs = {});
}  // namespace autograd

namespace serialize {
class OutputArchive final {
 public:
  OutputArchive();
  void save_to(const std::string& filename);
  void save_to(std::ostream& stream);
  void save_to(const std::function<size_t(const void*, size_t)>& func);
};
class InputArchive final {
 public:
  InputArchive();
  void load_from(const std::string& filename, c10::optional<Device> device = c10::nullopt);
  void load_from(std::istream& stream);
};
}  // namespace serialize
namespace nn {
class Module {
 public:
  virtual ~Module();
  void to(Device device, ScalarType dtype, bool non_blocking = false);
  void to(ScalarType dtype, bool non_blocking = false);
  void to(Device device, bool non_blocking = false);
  std::vector<Tensor> parameters(bool recurse = true) const;
  void train(bool on = true);
  void eval();
  template <class M> M register_module(std::string name, M module);
  virtual void save(serialize::OutputArchive& archive) const;
  virtual void load(serialize::InputArchive& archive);
};
template <class Contained> class ModuleHolder {
 public:
  ModuleHolder();
  ModuleHolder(std::nullptr_t);
  template <class... Args> explicit ModuleHolder(Args&&... args);
  Contained* operator->() const;
  Contained& operator*() const;
  std::shared_ptr<Contained> ptr() const;
  template <class... Args> Tensor operator()(Args&&... args);
};
struct LinearImpl : Module {
  LinearImpl(int64_t in, int64_t out);
  Tensor forward(const Tensor& x);
};
class Linear : public ModuleHolder<LinearImpl> {
 public:
  using ModuleHolder<LinearImpl>::ModuleHolder;
};
namespace parallel {
template <class ModuleType>
Tensor data_parallel(ModuleType module, Tensor input,
                     c10::optional<std::vector<Device>> devices = c10::nullopt,
                     c10::optional<Device> output_device = c10::nullopt, int64_t dim = 0);
}  // namespace parallel
}  // namespace nn
#define TORCH_MODULE(Name)                                         \
  class Name : public torch::nn::ModuleHolder<Name##Impl> {        \
   public:                                                         \
    using torch::nn::ModuleHolder<Name##Impl>::ModuleHolder;       \
  }

namespace optim {
struct OptimizerOptions {
  virtual ~OptimizerOptions();
};
struct OptimizerParamGroup {
  OptimizerParamGroup(std::vector<Tensor> params);
  OptimizerParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options);
};
class Optimizer {
 public:
  virtual ~Optimizer();
  using LossClosure = std::function<Tensor()>;
  void zero_grad();
  virtual Tensor step(LossClosure closure = nullptr);
  virtual void save(serialize::OutputArchive& archive) const;
  virtual void load(serialize::InputArchive& archive);
};
struct SGDOptions : OptimizerOptions {
  SGDOptions(double lr);
  SGDOptions& momentum(double m);
};
// A scheduler holds the optimizer it steers (a class derived from it is
// the program's, LibTorch's base is not).
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler();
  void step();

 protected:
  virtual std::vector<double> get_lrs() = 0;
  unsigned step_count_ = 0;
  Optimizer& optimizer_;
};
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  SGD(std::vector<OptimizerParamGroup> groups, SGDOptions options);
};
struct AdamOptions : OptimizerOptions {
  AdamOptions(double lr = 1e-3);
};
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  Adam(std::vector<OptimizerParamGroup> groups, AdamOptions options = {});
};
}  // namespace optim

namespace data {
template <class Data = Tensor, class Target = Tensor> struct Example {
  Data data;
  Target target;
};
namespace samplers {
class Sampler {
 public:
  virtual ~Sampler();
};
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(int64_t size);
};
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(size_t size);
};
}  // namespace samplers
struct DataLoaderOptions {
  DataLoaderOptions();
  DataLoaderOptions(size_t batch_size);
  DataLoaderOptions& batch_size(size_t n);
  DataLoaderOptions& workers(size_t n);
  DataLoaderOptions& drop_last(bool d);
};
template <class Batch> class Iterator {
 public:
  Batch& operator*();
  Iterator& operator++();
  bool operator!=(const Iterator& other) const;
};
template <class Dataset, class Batch, class BatchRequest> class DataLoaderBase {
 public:
  Iterator<Batch> begin();
  Iterator<Batch> end();
};
template <class Dataset, class Sampler>
class StatelessDataLoader
    : public DataLoaderBase<Dataset, typename Dataset::BatchType, std::vector<size_t>> {};
template <class Sampler = samplers::RandomSampler, class Dataset>
std::unique_ptr<StatelessDataLoader<Dataset, Sampler>> make_data_loader(Dataset dataset,
                                                                         DataLoaderOptions options);
template <class Sampler = samplers::RandomSampler, class Dataset>
std::unique_ptr<StatelessDataLoader<Dataset, Sampler>> make_data_loader(Dataset dataset,
                                                                         size_t batch_size);
template <class Dataset, class Sampler>
std::unique_ptr<StatelessDataLoader<Dataset, Sampler>> make_data_loader(Dataset dataset,
                                                                         Sampler sampler,
                                                                         DataLoaderOptions options);
namespace transforms {
template <class T = Example<>> struct Stack {
  using OutputBatchType = T;
};
template <class Output, class Input = std::vector<Output>> struct Collation {
  using OutputBatchType = Output;
  virtual ~Collation() = default;
  virtual Output apply_batch(Input input) = 0;
};
}  // namespace transforms
namespace datasets {
template <class Source, class Transform> struct MapDataset {
  using BatchType = typename Transform::OutputBatchType;
  c10::optional<size_t> size() const;
};
template <class Self, class SingleExample = Example<>> class Dataset {
 public:
  using BatchType = std::vector<SingleExample>;
  virtual ~Dataset();
  virtual SingleExample get(size_t index) = 0;
  virtual c10::optional<size_t> size() const = 0;
  template <class Transform> MapDataset<Self, Transform> map(Transform transform) &&;
};
}  // namespace datasets
}  // namespace data

template <class Value, class... SaveToArgs> void save(const Value& value, SaveToArgs&&... args);
template <class Value, class... LoadFromArgs> void load(Value& value, LoadFromArgs&&... args);
}  // namespace torch
