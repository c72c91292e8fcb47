// Fabric for LibTorch: Lightning Fabric's programming model on c10d.
//
//   #include <fabric/fabric.h>
//   int main() {
//     fabric::Fabric fabric(fabric::Options().accelerator("auto").devices(2));
//     fabric.launch();                       // starts local ranks 1..N-1
//     auto loader = fabric.setup_dataloader<torch::data::samplers::RandomSampler>(
//         std::move(dataset), batch_size);   // shards, reshuffles, moves to device
//     Net model;
//     torch::optim::SGD optimizer(model->parameters(), 0.1);
//     fabric.setup(model, optimizer);        // device, rank-0 weights, DDP
//     for (auto& batch : *loader) {
//       optimizer.zero_grad();
//       auto loss = torch::nll_loss(model->forward(batch.data), batch.target);
//       fabric.backward(loss);               // bucketed gradient all-reduce
//       optimizer.step();
//     }
//   }
//
// The whole program runs in every process (launch() re-executes it for the
// other local ranks, as Lightning does), so code before launch() runs N times.
#pragma once

#include <fabric/data.h>
#include <fabric/options.h>
#include <fabric/to_device.h>

#include <torch/torch.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace fabric {

enum class ReduceOp { Sum, Mean, Max, Min };

namespace detail {
class FabricState;  // process group, reducers, launcher; see src/fabric.cpp
// Path of the temporary file save() writes before renaming it over `path`.
std::string temporary_path_for(const std::string& path);
// rename(temporary, path); throws std::runtime_error naming both on failure.
void replace_file(const std::string& temporary, const std::string& path);
void remove_file_quietly(const std::string& path);
} // namespace detail

class Fabric {
 public:
  // Resolves the options (LT_* environment variables override them) and this
  // process's place in the job (RANK/WORLD_SIZE... when a launcher such as
  // torchrun started it). Starts nothing yet.
  explicit Fabric(Options options = Options());
  // Rank 0 of a job it launched waits here for the other local ranks; if one
  // failed, it reports it and exits the process with a non-zero code.
  ~Fabric();

  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  // Starts the job: joins processes started by a launcher, or re-executes
  // this program for local ranks 1..N-1 (same argv, env LOCAL_RANK, RANK,
  // WORLD_SIZE, MASTER_ADDR, MASTER_PORT...) and rendezvouses with them on a
  // TCPStore. Nothing happens with one process. If any rank dies, all exit
  // promptly with a message naming it. Call it from the main thread: the
  // started ranks are tied to the thread that started them until they run.
  void launch();

  torch::Device device() const;
  int global_rank() const;
  int local_rank() const;
  int node_rank() const;
  int world_size() const;
  bool is_global_zero() const;
  // The options after environment overrides, as resolved.
  const Options& options() const;

  // Moves the model to device(), broadcasts its parameters and buffers from
  // rank 0 and, for DDP with several processes, attaches a c10d::Reducer that
  // all-reduces the gradients of the parameters that require grad.
  template <class M, class... Optimizers>
  void setup(torch::nn::ModuleHolder<M>& model, Optimizers&... optimizers) {
    setup_module(model.ptr());
    (setup_optimizer(optimizers), ...);
  }
  template <class M, class... Optimizers>
  void setup(std::shared_ptr<M>& model, Optimizers&... optimizers) {
    static_assert(std::is_base_of<torch::nn::Module, M>::value,
                  "fabric::setup: the model must derive from torch::nn::Module");
    setup_module(model);
    (setup_optimizer(optimizers), ...);
  }
  void setup_module(const std::shared_ptr<torch::nn::Module>& module);
  void setup_optimizer(torch::optim::Optimizer& optimizer);

  // loss.backward(gradient, retain_graph, create_graph) with the gradients of
  // set-up models averaged across processes in buckets while backward runs.
  void backward(const torch::Tensor& loss, const torch::Tensor& gradient = {},
                c10::optional<bool> retain_graph = c10::nullopt, bool create_graph = false);

  // Replaces torch::data::make_data_loader<Sampler>(dataset, options). With
  // several processes the sampler becomes its distributed version (each rank
  // sees its own shard, reshuffled every epoch); with one process it stays
  // exactly the user's sampler. Batches arrive on device().
  template <class Sampler = torch::data::samplers::RandomSampler, class Dataset>
  auto setup_dataloader(Dataset dataset, torch::data::DataLoaderOptions options);
  template <class Sampler = torch::data::samplers::RandomSampler, class Dataset>
  auto setup_dataloader(Dataset dataset, size_t batch_size) {
    return setup_dataloader<Sampler>(std::move(dataset),
                                     torch::data::DataLoaderOptions(batch_size));
  }

  // std::cout on global rank 0, a stream that discards everything elsewhere.
  std::ostream& print();
  // Rank 0: the arguments separated by ' ', then '\n' (like Python's print).
  template <class... Args>
  void print(const Args&... args) {
    static_assert(sizeof...(Args) > 0, "use print() for a stream");
    if (!is_global_zero()) return;
    std::ostringstream line;
    const char* separator = "";
    ((line << separator << args, separator = " "), ...);
    line << '\n';
    write_to_stdout(line.str());
  }
  // Rank 0 only; returns printf's result there, 0 elsewhere. Flushes stdout.
  int printf(const char* format, ...) __attribute__((format(printf, 2, 3)));

  // Collectives. Each returns a new tensor on device(); with one process they
  // are identities (copies). Mean of an integer tensor is floating point.
  torch::Tensor all_reduce(const torch::Tensor& tensor, ReduceOp op = ReduceOp::Mean);
  // One tensor per rank, in rank order. The first dimension may differ
  // between ranks; the other dimensions and the dtype must match.
  std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor);
  torch::Tensor broadcast(const torch::Tensor& tensor, int src = 0);
  std::string broadcast(const std::string& value, int src = 0);
  // Waits for every rank. Ranks that reach barriers with different names are
  // on different code paths: that throws std::runtime_error on every rank.
  void barrier(const std::string& name = "");

  // Checkpoints. Every rank calls; rank 0 writes to a temporary file in the
  // same directory and renames it over `path` (atomic), then all ranks meet
  // in a barrier. T is anything torch::save accepts (ModuleHolder,
  // shared_ptr<Module>, optimizer, tensor...).
  template <class T>
  void save(const std::string& path, const T& value) {
    if (is_global_zero()) {
      const std::string temporary = detail::temporary_path_for(path);
      try {
        torch::save(value, temporary);
      } catch (...) {
        detail::remove_file_quietly(temporary);
        throw;
      }
      detail::replace_file(temporary, path);
    }
    barrier("fabric.save");
  }
  // Every rank reads `path`; the loaded tensors end up on device().
  template <class T>
  void load(const std::string& path, T& value) {
    torch::load(value, path, device());
  }

 private:
  void write_to_stdout(const std::string& text);

  std::unique_ptr<detail::FabricState> state_;
};

template <class Sampler, class Dataset>
auto Fabric::setup_dataloader(Dataset dataset, torch::data::DataLoaderOptions options) {
  static_assert(!Dataset::is_stateful,
                "fabric::setup_dataloader: stateful datasets are not supported yet");
  using BatchRequest = typename Sampler::BatchRequestType;
  static_assert(std::is_base_of<torch::data::samplers::Sampler<BatchRequest>, Sampler>::value,
                "fabric::setup_dataloader: Sampler must derive from "
                "torch::data::samplers::Sampler<>");
  static_assert(std::is_constructible<Sampler, size_t>::value,
                "fabric::setup_dataloader: Sampler must be constructible from the "
                "dataset size, as for torch::data::make_data_loader<Sampler>");
  using Loader = DataLoader<Dataset, BatchRequest>;

  const c10::optional<size_t> size = dataset.size();
  TORCH_CHECK(size.has_value(),
              "fabric::setup_dataloader: the dataset must have a size to build a sampler");
  std::shared_ptr<typename Loader::SamplerType> sampler;
  std::shared_ptr<typename Loader::DistributedSamplerType> distributed_sampler;
  if (world_size() == 1) {
    // Constructed here, exactly as make_data_loader does (RandomSampler draws
    // its first permutation in the constructor), so one process consumes the
    // global RNG in the same order as the unmigrated program.
    sampler = std::make_shared<Sampler>(*size);
  } else if constexpr (std::is_same<BatchRequest, std::vector<size_t>>::value) {
    distributed_sampler = detail::make_distributed_sampler<Sampler>(
        *size, static_cast<size_t>(world_size()), static_cast<size_t>(global_rank()));
    sampler = distributed_sampler;
  } else {
    throw std::invalid_argument(
        "fabric::setup_dataloader: a sampler with a custom batch request type "
        "cannot be sharded across processes");
  }
  return std::make_unique<Loader>(std::move(dataset), std::move(sampler),
                                  std::move(distributed_sampler), std::move(options), device());
}

} // namespace fabric
