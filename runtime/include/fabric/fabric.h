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
//       fabric.step(optimizer);              // optimizer.step(); sharded: + broadcast
//     }
//   }
//
// The whole program runs in every process (launch() re-executes it for the
// other local ranks, as Lightning does), so code before launch() runs N times.
#pragma once

#include <fabric/data.h>
#include <fabric/data_sharding.h>
#include <fabric/index_sampler.h>
#include <fabric/loggers.h>
#include <fabric/options.h>
#include <fabric/rank_zero.h>
#include <fabric/to_device.h>
#include <fabric/types.h>
#include <fabric/verify.h>

#include <torch/torch.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace fabric {

namespace detail {
class FabricState;   // the set-up models and what Fabric remembers; src/fabric.cpp
class DataSharding;  // loop sites, per-rank random streams, the duplicate-data check; src/data_sharding.h
class Strategy;      // owns the process group, precision and checkpoint IO
}  // namespace detail

// While alive, backward() accumulates the model's gradients locally instead
// of all-reducing them (gradient accumulation); the first backward after it
// is gone reduces the accumulated sum. See Fabric::no_backward_sync.
class [[nodiscard]] NoBackwardSync {
 public:
  NoBackwardSync(const NoBackwardSync&) = delete;
  NoBackwardSync& operator=(const NoBackwardSync&) = delete;
  ~NoBackwardSync();

 private:
  friend class Fabric;
  NoBackwardSync(detail::FabricState* state, const torch::nn::Module* module, bool enabled);
  detail::FabricState* state_;
  const torch::nn::Module* module_;
  bool enabled_;
};

// Rank 0 (or each node's local rank 0) runs the guarded scope first; the
// other ranks enter it once rank 0 has left it. See Fabric::rank_zero_first.
class [[nodiscard]] RankZeroFirst {
 public:
  RankZeroFirst(const RankZeroFirst&) = delete;
  RankZeroFirst& operator=(const RankZeroFirst&) = delete;
  ~RankZeroFirst() noexcept(false);

 private:
  friend class Fabric;
  RankZeroFirst(Fabric& fabric, bool first);
  Fabric& fabric_;
  bool first_;  // this rank goes first
  int uncaught_exceptions_;
};

class Fabric {
 public:
  // Resolves the options (LT_* environment variables override them) and this
  // process's place in the job (RANK/WORLD_SIZE... when a launcher such as
  // torchrun started it). Starts nothing yet.
  explicit Fabric(Options options = Options());
  // Rank 0 of a job it launched waits here for the other local ranks; if one
  // failed, it reports it and exits the process with a non-zero code. With
  // several processes every rank first waits here until all have finished;
  // if another rank waits in a collective that this one will never join
  // (the ranks left the training loop at different steps), the job ends
  // within seconds, every rank with exit code 1, with a message naming the
  // ranks and their step counts. FABRIC_CHECK_SYNC=1: rank 0 prints
  // "fabric: sync check passed: ..." (see docs/runtime.md).
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
  // What the sync check (FABRIC_CHECK_SYNC, on by default) has cost this
  // rank so far: the checks run and their wall time, gathers included (the
  // check at the end, in ~Fabric, comes after). bench/sync_check_cost.py
  // reports it against the run's time.
  struct SyncCheckCost {
    std::int64_t checks = 0;
    double seconds = 0;
  };
  SyncCheckCost sync_check_cost() const;

  // Moves the model to device(), broadcasts its parameters and buffers from
  // rank 0 and, for DDP with several processes, attaches a c10d::Reducer that
  // all-reduces the gradients of the parameters that require grad. Under
  // "zero1"/"zero2" each trained parameter gets an owner rank (greedy by
  // size), the only one that keeps its optimizer state. Throws for an
  // optimizer the strategy cannot run (LBFGS under a sharded strategy).
  // Which parameters require grad may change later (LoRA: the adapters
  // first, then everything): backward() follows it. An optimizer created
  // later (the second phase's) is set up with setup_optimizer(optimizer).
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
  // A model held by value (`struct Net : torch::nn::Module {...}; Net model;`).
  // Fabric does not own it and never touches the object after setup returns:
  // it keeps the parameter tensors (which DDP's Reducer needs) instead, so
  // the model may be destroyed before the Fabric, as it is when the Fabric
  // is declared first in main. Optimizers may be passed through a pointer to
  // the base class: fabric.setup(model, *optimizer).
  template <class M, class... Optimizers, std::enable_if_t<detail::is_plain_module<M>::value, int> = 0>
  void setup(M& model, Optimizers&... optimizers) {
    setup_module(static_cast<torch::nn::Module&>(model));
    (setup_optimizer(optimizers), ...);
  }
  void setup_module(const std::shared_ptr<torch::nn::Module>& module);
  // A module the program owns itself (held by value); see setup(M&).
  void setup_module(torch::nn::Module& module);
  // An optimizer of a model set up before, created after setup() (a
  // training phase with another optimizer): what setup(model, optimizer)
  // does for it. Call it on every rank.
  // Its parameters that no set-up model owns (a class that is not a module
  // holds the modules and gathers their parameters; an extra tensor in a
  // set-up model's optimizer) become a parameter set of their own,
  // synchronized like a model: moved to device() and cast for "*-true"
  // precisions in place (the optimizer keeps the same tensors), rank 0's
  // values broadcast, gradients reduced by the strategy (ddp: a Reducer;
  // zero1/zero2: owners), loss scaler and FABRIC_CHECK_SYNC included. The
  // buffers of the modules that hold them are not visible here and are not
  // broadcast (rank 0 notes it once on stderr). A module set up later takes
  // its parameters out of such a set. See docs/runtime.md.
  void setup_optimizer(torch::optim::Optimizer& optimizer);

  // loss.backward(gradient, retain_graph, create_graph) with the gradients of
  // set-up models averaged across processes in buckets while backward runs.
  // With several processes, a loss that reaches no set-up model makes rank
  // 0 warn once per job on stderr (nothing would be synchronized).
  // "zero2": afterwards each rank holds the averaged gradients of the
  // parameters it owns only; the others' are undefined. Under "ddp"/"zero1"
  // without Options::find_unused_parameters, a loss that does not reach
  // every trained parameter of a set-up model throws std::runtime_error
  // naming them, before anything is computed or sent (strategy
  // "ddp_find_unused_parameters_true" trains such models).
  // The gradients synchronized are those of the parameters that require
  // grad now: when that set changed since the previous backward
  // (requires_grad_ on some parameters after setup), the strategy's
  // synchronization is rebuilt over the new set. Every rank must change it
  // at the same backward: with several processes the ranks check that they
  // agree (one small all-gather, at such a backward only) and throw
  // std::runtime_error, before anything is computed or sent, when not.
  void backward(const torch::Tensor& loss, const torch::Tensor& gradient = {},
                c10::optional<bool> retain_graph = c10::nullopt, bool create_graph = false);

  // optimizer.step() for every strategy, so one training loop runs under all
  // of them. Under "zero1"/"zero2" only the parameters this rank owns are
  // updated (and get optimizer state), then each parameter is broadcast from
  // its owner; calling optimizer.step() directly there would leave the
  // ranks with different models, and the next backward()/step()/save()
  // throws std::logic_error saying so. A step that the "16-mixed" loss
  // scaler skipped (inf/NaN gradients, cleared by backward) changes nothing.
  // With several processes, an optimizer none of whose parameters belongs to
  // a set-up model makes rank 0 warn once per job. FABRIC_CHECK_SYNC=1
  // compares the parameters across ranks after every step.
  void step(torch::optim::Optimizer& optimizer);
  // optimizer.step(closure); returns the closure's loss. The closure calls
  // fabric.backward(). Sharded strategies call it once before stepping.
  torch::Tensor step(torch::optim::Optimizer& optimizer, torch::optim::Optimizer::LossClosure closure);

  // Replaces torch::data::make_data_loader<Sampler>(dataset, options). With
  // several processes the sampler becomes its distributed version (each rank
  // sees its own shard, reshuffled every epoch); with one process it stays
  // exactly the user's sampler. Batches arrive on device().
  template <class Sampler = torch::data::samplers::RandomSampler, class Dataset>
  auto setup_dataloader(Dataset dataset, torch::data::DataLoaderOptions options);
  template <class Sampler = torch::data::samplers::RandomSampler, class Dataset>
  auto setup_dataloader(Dataset dataset, size_t batch_size) {
    return setup_dataloader<Sampler>(std::move(dataset), torch::data::DataLoaderOptions(batch_size));
  }

  // For a DataLoader class of the program's own (see index_sampler.h): this
  // rank's sampler over a dataset of `dataset_size` samples, with
  // num_replicas = world_size() and rank = global_rank(). Each epoch:
  //   indices_ = sampler.indices(epoch);
  DistributedIndexSampler index_sampler(size_t dataset_size,
                                        IndexSamplerOptions options = IndexSamplerOptions()) const {
    return DistributedIndexSampler(dataset_size, static_cast<size_t>(world_size()), static_cast<size_t>(global_rank()),
                                   options);
  }
  // For a program that shuffles its index vector itself, with its own
  // generator (seeded alike or not on every rank): rank 0's order is
  // broadcast (a collective: every rank calls it, with a vector of the same
  // length; a different length throws std::invalid_argument on every rank),
  // and this rank's strided share of it is returned (positions rank,
  // rank + world_size(), ...; padded or not as IndexSamplerOptions::pad). With
  // one process the vector comes back as it is, without a collective.
  //   std::shuffle(indices.begin(), indices.end(), rng);
  //   indices = fabric.shard(std::move(indices));
  // (`file` and `line` are the caller's, for fabricize verify's records.)
  template <class Index>
  std::vector<Index> shard(std::vector<Index> indices, bool pad = true, const char* file = __builtin_FILE(),
                           int line = __builtin_LINE()) {
    static_assert(std::is_integral<Index>::value && !std::is_same<Index, bool>::value,
                  "fabric::Fabric::shard: the elements must be integer indices into the "
                  "dataset (size_t, int64_t, int...)");
    if (world_size() == 1) {
      detail::record_share(file, line, indices.size(), indices.size());
      return indices;
    }
    // What travels: every index type fits in 64 bits.
    return detail::from_int64_indices<Index>(shard_order(detail::to_int64_indices(indices), pad, file, line));
  }
  // The same for a 1-D integer tensor (a torch::randperm order): this rank's
  // share of rank 0's values, on `order`'s device and in its dtype.
  //   auto mine = fabric.shard(torch::randperm(n));
  torch::Tensor shard(const torch::Tensor& order, bool pad = true, const char* file = __builtin_FILE(),
                      int line = __builtin_LINE());

  // ---- data the program reads itself (fabric/data_sharding.h) ----------------
  // This rank's values of `for (T i = begin; i < end; i += step)` (step > 0,
  // else std::invalid_argument naming it), computed lazily: the values at
  // positions rank, rank + world_size(), ... of the loop's m values, the
  // first values again past the end where a share is one short (padded) --
  // handed out only where this loop (its file:line) has fed a backward pass,
  // so training loops run equal step counts on every rank and evaluation
  // loops count every value once. One process: the loop's values, in order.
  //   for (int64_t i = 0; i < n; i += bs) {              // was
  //   for (int64_t i : fabric.shard_range(int64_t{0}, n, bs)) {
  //     auto x = X.slice(0, i, std::min(i + bs, n)); ...
  // T is begin's type (as the loop variable's); end and step convert to it.
  template <class T>
  ShardRange<T> shard_range(T begin, detail::type_identity_t<T> end, detail::type_identity_t<T> step = 1,
                            const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return ShardRange<T>(begin, step, share_of(detail::range_length<T>(begin, end, step), file, line));
  }
  // This rank's elements of a random-access container that every rank holds
  // in the same order (std::vector, std::deque, std::array, a C array), by
  // reference, strided and padded as shard_range. A temporary is moved into
  // the view, which owns it for the loop. One process: every element, in order.
  //   for (auto& batch : fabric.shard_elements(batches)) { ... }
  template <class Container>
  auto shard_elements(Container&& container, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    const auto size = static_cast<uint64_t>(std::size(container));
    return ShardElements<Container>(std::forward<Container>(container), share_of(size, file, line));
  }
  // std::shuffle(first, last, generator) with rank 0's draws: every rank
  // draws its permutation with its own generator (which advances as
  // std::shuffle advances it), and every rank puts [first, last) in rank 0's
  // order. A collective: every rank calls it with as many elements (another
  // number throws std::invalid_argument on every rank). One process: exactly
  // std::shuffle.
  template <class RandomIt, class URBG>
  void shuffle(RandomIt first, RandomIt last, URBG&& generator) {
    if (world_size() == 1) {
      std::shuffle(first, last, std::forward<URBG>(generator));
      return;
    }
    // std::shuffle's swaps depend only on the length and the draws.
    std::vector<int64_t> order(static_cast<size_t>(std::distance(first, last)));
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
    std::shuffle(order.begin(), order.end(), generator);
    order = broadcast_order(std::move(order), "fabric.shuffle()");
    std::vector<typename std::iterator_traits<RandomIt>::value_type> values;
    values.reserve(order.size());
    for (const int64_t from : order) values.push_back(std::move(first[static_cast<std::ptrdiff_t>(from)]));
    std::move(values.begin(), values.end(), first);
  }
  // torch::randperm(n, options) drawn on every rank (each rank's default
  // generator advances alike), rank 0's permutation on every rank, in the
  // dtype and on the device torch::randperm gives. One process: exactly
  // torch::randperm(n, options).
  torch::Tensor randperm(int64_t n, torch::TensorOptions options = torch::kLong);
  // While the guard lives, LibTorch's default generators (CPU, and this
  // rank's CUDA device) draw from this rank's own stream; the stream every
  // rank draws in lockstep is left as it was (restored when the guard ends).
  // The own stream continues from one guard to the next (seeded on first use
  // from the shared seed and the global rank; saved with fabric::RandomState).
  // Nested guards do nothing; with one process the guard does nothing.
  //   { auto per_rank = fabric.per_rank_random(); x = torch::randn({bs, 8}); }
  PerRankRandom per_rank_random();

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
  // A file that global rank 0 writes (a loss log, a CSV of metrics): opened
  // there with `mode`; every other rank gets a stream on /dev/null, so N
  // ranks neither write N copies nor truncate rank 0's file when they open
  // it. fabricize turns `std::ofstream log(path)` into
  // `std::ofstream log(fabric.rank_zero_ofstream(path))`. Where no Fabric is
  // at hand (a logger class of the program's own), the free function
  // fabric::rank_zero_ofstream(path, mode) does the same.
  std::ofstream rank_zero_ofstream(const std::string& path, std::ios::openmode mode = std::ios::out) const {
    return detail::open_rank_zero_ofstream(is_global_zero(), path, mode);
  }
  // A child process that global rank 0 writes to (`popen("gnuplot", "w")`
  // drawing the loss curve into an image): popen(command, mode) there; on
  // every other rank a command that reads and discards what is written, so
  // the program's fprintf and pclose work unchanged and N ranks do not run
  // N gnuplots writing one file. A mode that only reads ("r": the program
  // wants the command's output) runs the command on every rank. fabricize
  // turns `popen(cmd, "w")` into `fabric.rank_zero_popen(cmd, "w")`.
  FILE* rank_zero_popen(const char* command, const char* mode) const;
  FILE* rank_zero_popen(const std::string& command, const char* mode) const {
    return rank_zero_popen(command.c_str(), mode);
  }

  // Collectives. Each returns a new tensor on device(); with one process they
  // are identities (copies). Mean of an integer tensor is floating point.
  torch::Tensor all_reduce(const torch::Tensor& tensor, ReduceOp op = ReduceOp::Mean);
  // A number of this rank (a metric accumulated over the rank's shard):
  //   total_loss = fabric.all_reduce(total_loss, fabric::ReduceOp::Sum);
  // Returns the same type. Floating point values are reduced as double;
  // integers (and bool) as int64_t, so Sum, Max and Min are exact within
  // int64_t's range (a result that does not fit the type, or an unsigned
  // value above INT64_MAX, throws std::overflow_error). Mean of an integer
  // or bool throws std::invalid_argument (an average is not an integer:
  // reduce a double, or Sum and divide). For bool, Max is "any rank", Min
  // "every rank" and Sum is Max. With one process the value comes back
  // unchanged, with no work and no random number drawn.
  template <class T, std::enable_if_t<std::is_arithmetic<T>::value, int> = 0>
  T all_reduce(T value, ReduceOp op = ReduceOp::Mean) {
    if constexpr (std::is_floating_point<T>::value) {
      if (world_size() == 1) return value;
      return static_cast<T>(all_reduce_double(static_cast<double>(value), op));
    } else {
      check_integer_reduction(op, std::is_same<T, bool>::value ? "bool" : "an integer");
      if (world_size() == 1) return value;
      if constexpr (std::is_same<T, bool>::value) {
        return all_reduce_integer(value ? 1 : 0, op == ReduceOp::Min ? op : ReduceOp::Max) != 0;
      } else {
        if constexpr (std::is_unsigned<T>::value && sizeof(T) >= sizeof(int64_t)) {
          if (value > static_cast<T>(std::numeric_limits<int64_t>::max())) {
            throw_integer_overflow("an unsigned value above INT64_MAX was passed");
          }
        }
        const int64_t result = all_reduce_integer(static_cast<int64_t>(value), op);
        const bool fits =
            std::is_signed<T>::value
                ? (sizeof(T) >= sizeof(int64_t) || (result >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                                                    result <= static_cast<int64_t>(std::numeric_limits<T>::max())))
                : (result >= 0 &&
                   (sizeof(T) >= sizeof(int64_t) ||
                    static_cast<uint64_t>(result) <= static_cast<uint64_t>(std::numeric_limits<T>::max())));
        if (!fits) throw_integer_overflow("the result does not fit the type");
        return static_cast<T>(result);
      }
    }
  }
  // One tensor per rank, in rank order. The first dimension may differ
  // between ranks; the other dimensions and the dtype must match.
  std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor);
  torch::Tensor broadcast(const torch::Tensor& tensor, int src = 0);
  std::string broadcast(const std::string& value, int src = 0);
  // Waits for every rank. Ranks that reach barriers with different names are
  // on different code paths: that throws std::runtime_error on every rank.
  void barrier(const std::string& name = "");

  // Checkpoints of one object. Every rank calls; rank 0 writes to a
  // temporary file in the same directory and renames it over `path`
  // (atomic), then every rank learns whether that worked (an error throws
  // fabric::CheckpointError on all ranks). T is anything torch::save accepts
  // (ModuleHolder, shared_ptr<Module>, optimizer, tensor...), a module
  // held by value, or a torch::serialize::OutputArchive the program filled
  // itself (what archive.save_to(path) writes). An optimizer's state is
  // gathered on rank 0 first under a sharded strategy (same file as ddp).
  template <class T, class = std::enable_if_t<!std::is_same<std::decay_t<T>, State>::value>>
  void save(const std::string& path, const T& value) {
    if constexpr (std::is_base_of<torch::optim::Optimizer, T>::value) {
      // Rank 0's optimizer briefly holds the other ranks' state as well; it
      // holds only its own again when save returns.
      save_optimizer_file(path, const_cast<T&>(value));
    } else if constexpr (detail::is_plain_module<T>::value) {
      // torch::save has no overload for a module held by value; this is what
      // it writes for a shared_ptr<Module> (Module::save into one archive).
      save_with(path, [&value](std::ostream& stream) {
        torch::serialize::OutputArchive archive;
        value.save(archive);
        archive.save_to(stream);
      });
    } else if constexpr (std::is_same<T, torch::serialize::OutputArchive>::value) {
      // OutputArchive::save_to is not const, and writes the archive as it is.
      save_with(path, [&value](std::ostream& stream) {
        const_cast<torch::serialize::OutputArchive&>(value).save_to(stream);
      });
    } else {
      save_with(path, [&value](std::ostream& stream) { torch::save(value, stream); });
    }
  }
  // Every rank reads `path`; the loaded tensors end up on device(). A
  // model's parameters and buffers are overwritten in place (their storage
  // stays the one setup() prepared for DDP; shapes must match). A file that
  // is missing, unreadable, truncated, corrupted or holds something else
  // throws fabric::CheckpointError (a c10::Error, as torch::load throws) on
  // every rank, also when only some ranks cannot read it, and before
  // anything is modified:
  //   try { fabric.load("ckpt.pt", model); } catch (const c10::Error&) { /* start fresh */ }
  template <class T, class = std::enable_if_t<!std::is_same<std::decay_t<T>, State>::value>>
  void load(const std::string& path, T& value) {
    if constexpr (detail::is_module_holder<T>::value) {
      load_module_file(path, *value.ptr());
    } else if constexpr (detail::is_module_pointer<T>::value) {
      load_module_file(path, *value);
    } else if constexpr (detail::is_plain_module<T>::value) {
      load_module_file(path, value);
    } else if constexpr (std::is_base_of<torch::optim::Optimizer, T>::value) {
      load_optimizer_file(path, value);  // then keeps only this rank's shard
    } else {
      load_other_file(path, [&value, this](const std::string& file) { torch::load(value, file, device()); });
    }
  }

  // Checkpoints of the whole training state: modules, optimizers, tensors
  // and plain values by name, in one file (same writing rules as above).
  // Under a sharded strategy the optimizers' state is gathered on rank 0,
  // so the file is the one ddp writes; load() keeps each rank's shard.
  void save(const std::string& path, const State& state);
  // Every rank reads `path` and overwrites the state's objects in place,
  // tensors mapped to device(). With `strict`, a name in the file that the
  // state lacks is an error too; a name the file lacks always is. Errors
  // (missing file, truncated or corrupted file, wrong kind of entry) throw
  // fabric::CheckpointError (a c10::Error) on every rank before anything is
  // modified, where they can be seen.
  void load(const std::string& path, const State& state, bool strict = true);

  // Logging to the loggers of the options, on global rank 0 only (a no-op
  // elsewhere and without loggers). `step` < 0: the number of earlier calls.
  void log(const std::string& name, double value, int64_t step = -1);
  void log(const std::string& name, const torch::Tensor& value, int64_t step = -1) {
    log(name, value.detach().cpu().item<double>(), step);
  }
  void log_dict(const Metrics& metrics, int64_t step = -1);
  template <class Map>
  void log_dict(const Map& metrics, int64_t step = -1) {
    Metrics ordered;
    for (const auto& item : metrics) ordered.emplace_back(item.first, static_cast<double>(item.second));
    log_dict(ordered, step);
  }
  // The options' loggers (the same objects on every rank).
  const std::vector<std::shared_ptr<Logger>>& loggers() const;

  // Gradient accumulation: inside the guard's scope, backward() leaves the
  // model's gradients local (no communication); the next backward outside
  // it all-reduces the accumulated sum, as with DDP's no_sync().
  //   { auto no_sync = fabric.no_backward_sync(model); fabric.backward(loss); }
  // `enabled = false` makes the guard do nothing (the last micro-batch).
  template <class M>
  NoBackwardSync no_backward_sync(torch::nn::ModuleHolder<M>& model, bool enabled = true) {
    return NoBackwardSync(checked_state_for_no_sync(model.ptr().get()), model.ptr().get(), enabled);
  }
  template <class M>
  NoBackwardSync no_backward_sync(std::shared_ptr<M>& model, bool enabled = true) {
    return NoBackwardSync(checked_state_for_no_sync(model.get()), model.get(), enabled);
  }
  template <class M, std::enable_if_t<detail::is_plain_module<M>::value, int> = 0>
  NoBackwardSync no_backward_sync(M& model, bool enabled = true) {
    const torch::nn::Module* module = &model;
    return NoBackwardSync(checked_state_for_no_sync(module), module, enabled);
  }

  // How many backward passes of this process synchronized gradients across
  // ranks (0 with one process): a loop that accumulates over k micro-batches
  // under no_backward_sync counts one per optimizer step, not k. For
  // benchmarks and tests.
  uint64_t gradient_synchronizations() const;

  // Clips the gradients of `model`'s parameters, either by total norm
  // (`max_norm`, as torch::nn::utils::clip_grad_norm_) or elementwise to
  // [-clip_val, clip_val]; exactly one must be given. Call it after
  // backward() (gradients are then identical on every rank) and before
  // the step. Returns the total `norm_type` norm of the gradients before
  // clipping. Throws on a non-finite norm if `error_if_nonfinite`. Under
  // "zero2" (each rank holds its own parameters' gradients) the norm
  // combines the ranks' partial norms: every rank must call it.
  template <class M>
  torch::Tensor clip_gradients(torch::nn::ModuleHolder<M>& model, torch::optim::Optimizer& optimizer,
                               c10::optional<double> clip_val = c10::nullopt,
                               c10::optional<double> max_norm = c10::nullopt, double norm_type = 2.0,
                               bool error_if_nonfinite = true) {
    return clip_module_gradients(*model.ptr(), optimizer, clip_val, max_norm, norm_type, error_if_nonfinite);
  }
  template <class M>
  torch::Tensor clip_gradients(std::shared_ptr<M>& model, torch::optim::Optimizer& optimizer,
                               c10::optional<double> clip_val = c10::nullopt,
                               c10::optional<double> max_norm = c10::nullopt, double norm_type = 2.0,
                               bool error_if_nonfinite = true) {
    return clip_module_gradients(*model, optimizer, clip_val, max_norm, norm_type, error_if_nonfinite);
  }
  template <class M, std::enable_if_t<detail::is_plain_module<M>::value, int> = 0>
  torch::Tensor clip_gradients(M& model, torch::optim::Optimizer& optimizer,
                               c10::optional<double> clip_val = c10::nullopt,
                               c10::optional<double> max_norm = c10::nullopt, double norm_type = 2.0,
                               bool error_if_nonfinite = true) {
    return clip_module_gradients(model, optimizer, clip_val, max_norm, norm_type, error_if_nonfinite);
  }

  // Mixed precision around the forward pass and the loss (C++ has no hook
  // around a module's forward, so the guard is explicit):
  //   { auto autocast = fabric.autocast(); loss = criterion(model->forward(x), y); }
  //   fabric.backward(loss);
  Autocast autocast();
  // "16-mixed": the current loss scale (backward multiplies the loss by it,
  // divides the gradients by it after they are all-reduced, and on inf/NaN
  // gradients clears them so that optimizer.step() skips every parameter,
  // then halves it; it doubles after growth_interval clean steps). 1 for
  // the other precisions. Saved with a fabric::State and loaded back.
  double loss_scale() const;

  // { auto first = fabric.rank_zero_first(); download(); }  Rank 0 runs the
  // scope alone, the others after it (every rank must create the guard).
  // `local`: each node's local rank 0 goes first instead of global rank 0.
  RankZeroFirst rank_zero_first(bool local = false);

 private:
  void write_to_stdout(const std::string& text);
  // Rank 0 serializes with `write` and writes the file atomically; every
  // rank then learns the outcome (throws everywhere on failure).
  template <class Write>
  void save_with(const std::string& path, Write&& write) {
    // Sharded parameters (fsdp) are whole on every rank while rank 0 writes.
    const std::shared_ptr<void> readable = hold_parameters_readable();
    std::string error;
    if (is_global_zero()) {
      try {
        std::ostringstream bytes(std::ios::out | std::ios::binary);
        write(bytes);
        write_checkpoint_file(path, bytes.str());
      } catch (const std::exception& failure) {
        error = failure.what();
        if (error.empty()) error = "unknown error";
      }
    }
    finish_save(path, error);
  }
  void finish_save(const std::string& path, const std::string& error_on_rank_zero);
  // Through the strategy's checkpoint IO (atomically, by default).
  void write_checkpoint_file(const std::string& path, const std::string& bytes);
  // The strategy, which owns the process group, precision and checkpoint IO.
  detail::Strategy& strategy() const;
  // Collective: every set-up parameter's memory whole until the result is
  // destroyed (on every rank).
  std::shared_ptr<void> hold_parameters_readable();
  // fsdp's sharded checkpoints (sharded_checkpoints.cpp): a directory in
  // which every rank writes its part; loaded on any number of ranks.
  bool saves_sharded() const;
  void save_sharded(const std::string& path, const State& state);
  void load_sharded(const std::string& path, const State& state, bool strict);
  void load_module_file(const std::string& path, torch::nn::Module& module);
  // fabric.load of anything else torch::load reads (a tensor...): `read`
  // runs torch::load on every rank, whose outcomes are agreed on.
  void load_other_file(const std::string& path, const std::function<void(const std::string&)>& read);
  void check_sync_after_step(torch::optim::Optimizer& optimizer);
  void check_sync_sampled(bool at_end);
  [[noreturn]] void stop_for_sync_check(const std::string& failure);
  // Fabric::shard's and shuffle's collective: rank 0's `order` on every
  // rank (`call`, "fabric.shard()" or "fabric.shuffle()", names it).
  std::vector<int64_t> broadcast_order(std::vector<int64_t> order, const char* call);
  // Rank 0's order broadcast, this rank's strided share returned (the
  // share recorded for fabricize verify).
  std::vector<int64_t> shard_order(std::vector<int64_t> order, bool pad, const char* file, int line);
  // This rank's share of a loop of `total` values at file:line (data_sharding.cpp).
  detail::Share share_of(uint64_t total, const char* file, int line);
  // Fabric::backward, with several processes, after its `synchronization`-th
  // backward pass that synchronized gradients (every rank runs as many):
  // compares the loss across the ranks at a few of them, to tell ranks that
  // train on the same batches.
  void watch_for_duplicate_data(const torch::Tensor& loss, uint64_t synchronization);
  // fabric::RandomState: this rank's default generators, shared and own
  // streams (whether or not a per_rank_random guard is alive), and back.
  detail::LocalGeneratorStates generator_states() const;
  void restore_generator_states(const detail::LocalGeneratorStates& states);
  double all_reduce_double(double value, ReduceOp op);
  int64_t all_reduce_integer(int64_t value, ReduceOp op);
  static void check_integer_reduction(ReduceOp op, const char* what);
  [[noreturn]] static void throw_integer_overflow(const char* why);
  void save_optimizer_file(const std::string& path, torch::optim::Optimizer& optimizer);
  void load_optimizer_file(const std::string& path, torch::optim::Optimizer& optimizer);
  detail::FabricState* checked_state_for_no_sync(const torch::nn::Module* module);
  // Counts this process's backward passes, for the loaders' samplers.
  detail::BackwardPassCounter backward_pass_counter() const;
  torch::Tensor clip_module_gradients(torch::nn::Module& module, torch::optim::Optimizer& optimizer,
                                      c10::optional<double> clip_val, c10::optional<double> max_norm, double norm_type,
                                      bool error_if_nonfinite);

  std::unique_ptr<detail::FabricState> state_;
  std::unique_ptr<detail::DataSharding> sharding_;
};

template <class Sampler, class Dataset>
auto Fabric::setup_dataloader(Dataset dataset, torch::data::DataLoaderOptions options) {
  static_assert(!Dataset::is_stateful, "fabric::setup_dataloader: stateful datasets are not supported yet");
  using BatchRequest = typename Sampler::BatchRequestType;
  static_assert(std::is_base_of<torch::data::samplers::Sampler<BatchRequest>, Sampler>::value,
                "fabric::setup_dataloader: Sampler must derive from "
                "torch::data::samplers::Sampler<>");
  static_assert(std::is_constructible<Sampler, size_t>::value,
                "fabric::setup_dataloader: Sampler must be constructible from the "
                "dataset size, as for torch::data::make_data_loader<Sampler>");
  using Loader = DataLoader<Dataset, BatchRequest>;

  const c10::optional<size_t> size = dataset.size();
  TORCH_CHECK(size.has_value(), "fabric::setup_dataloader: the dataset must have a size to build a sampler");
  std::shared_ptr<typename Loader::SamplerType> sampler;
  std::shared_ptr<typename Loader::DistributedSamplerType> distributed_sampler;
  if (world_size() == 1) {
    // Constructed here, exactly as make_data_loader does (RandomSampler draws
    // its first permutation in the constructor), so one process consumes the
    // global RNG in the same order as the unmigrated program.
    sampler = std::make_shared<Sampler>(*size);
    verify::detail::Recorder::instance().share(detail::next_loader_site(), *size, *size);
  } else if constexpr (std::is_same<BatchRequest, std::vector<size_t>>::value) {
    // Constructed and dropped, so that every process draws from the global
    // generator what the unmigrated program draws here (RandomSampler's
    // first permutation): what the program draws next (the model's initial
    // weights, a test set) is then the same as in the original run.
    {
      Sampler draws_as_the_original_does(*size);
    }
    distributed_sampler = detail::make_distributed_sampler<Sampler>(
        *size, static_cast<size_t>(world_size()), static_cast<size_t>(global_rank()), backward_pass_counter(),
        detail::next_loader_site());
    sampler = distributed_sampler;
  } else {
    throw std::invalid_argument(
        "fabric::setup_dataloader: a sampler with a custom batch request type "
        "cannot be sharded across processes");
  }
  return std::make_unique<Loader>(std::move(dataset), std::move(sampler), std::move(distributed_sampler),
                                  std::move(options), device());
}

}  // namespace fabric
