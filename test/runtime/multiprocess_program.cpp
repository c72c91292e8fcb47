// The program behind the multi-process runtime tests. Fabric re-executes it
// for every rank, so each scenario runs its checks on every rank; a failed
// check exits that rank with code 1 and a message, which makes the whole job
// exit non-zero (Fabric stops the other ranks).
//
//   fabric_multiprocess_program ddp [--devices=N]
//       parameters/buffers identical across ranks after setup and after
//       training; DDP gradients equal single-process gradients on the whole
//       batch; distributed samplers shard, cover and reshuffle; collectives;
//       checkpoints.
//   fabric_multiprocess_program argv OUT_DIR ARGS...
//       (for fabric-run) writes its ARGS, NUL-separated, and its launcher
//       environment to OUT_DIR/rank<R>.argv and OUT_DIR/rank<R>.env.
//   fabric_multiprocess_program state --dir=D [--devices=N]
//       fabric::State round trip and load errors, symlink at the temporary
//       path, rank_zero_first, no_backward_sync, clip_gradients, seeding.
//   fabric_multiprocess_program resume --dir=D --phase=full|first|second
//       trains (full: 8 steps; first: 4 steps then save; second: load then
//       4 steps) and prints every step's loss exactly (hex float).
//   fabric_multiprocess_program save_twice --dir=D
//       saves step 1, then step 2 (the test pauses and kills it in between).
//   fabric_multiprocess_program log --dir=D
//       logs loss/acc/lr on every rank to a CSVLogger (D/csv) and a
//       TensorBoardLogger (D/tb); the test reads the files.
//   fabric_multiprocess_program scaler [--devices=N]
//       "16-mixed" on N ranks: an inf on one rank only makes every rank skip
//       the step and halve the scale; unscaled gradients equal fp32 DDP's.
//   fabric_multiprocess_program fail --devices=N --fail-rank=R --fail-step=S
//       [--fail-how=exit|sigkill|abort|throw] [--marker=...]
//       trains with all-reduce every step; rank R dies at step S (exit code 3
//       or SIGKILL, or an exception that leaves the Fabric's scope and makes
//       main return 4), or with S = -1 exits 0 before launch(). --marker only
//       tags the processes for the test driver.
//   fabric_multiprocess_program by_value [--devices=N]
//       models held by value (struct Net : torch::nn::Module; Net model;):
//       DDP in sync, setup without optimizer, a GAN of two by-value models,
//       an optimizer through unique_ptr<Optimizer>, a train() function
//       called twice (the second model at the first one's address),
//       save/load, no_backward_sync and clip_gradients on a by-value model.
//   fabric_multiprocess_program scalars [--devices=N]
//       fabric.all_reduce of double, float, int, int64_t, long, size_t,
//       unsigned, bool with Sum/Mean/Max/Min.
//   fabric_multiprocess_program load_fresh --dir=D [--devices=N]
//       try { fabric.load(...) } catch (const c10::Error&) { start fresh }
//       for every overload; a checkpoint missing (or corrupted) on some
//       ranks only throws on every rank; training then continues in sync.
//   fabric_multiprocess_program diverge --stop-rank=R --stop-step=K [--steps=N]
//       [--collective=barrier|all_reduce|save --dir=D]
//       trains with DDP; rank R leaves the loop after step K (a stop
//       condition that differs per rank). The job must end within seconds.
//       With --collective, every step ends with that collective, in which
//       the other ranks then wait (instead of the next backward).
//   fabric_multiprocess_program paths --path=P --stop-rank=R --stop-step=K [--steps=N]
//       rank R takes another path at step K (P: scalar_after_loop, barrier,
//       broadcast, skip_backward; see run_paths) and the ranks enter
//       different collectives. The job must end within seconds.
//   fabric_multiprocess_program late_work [--local-work-s=S] [--local-work-rank=R]
//       trains 5 steps in sync, then rank R (0) works alone for S seconds
//       (no collective) while the others have finished: must succeed.
//   fabric_multiprocess_program unsynchronized --setup=0|1
//       backward and fabric.step for a model that was (not) set up.
//   fabric_multiprocess_program sync [--perturb-rank=R --perturb-step=K] [--strategy=S]
//       6 fabric.step()s (FABRIC_CHECK_SYNC is the driver's); rank R
//       changes a parameter outside the Fabric after step K.
//   fabric_multiprocess_program unused [--devices=N] [--strategy=S] [--find-unused=0|1]
//       [--uncaught=1 [--unused-rank=R]]
//       a model whose second head is used on some steps only: without
//       find_unused_parameters the backward that leaves it unused throws,
//       naming head2.weight and head2.bias (zero2: no error); with it the
//       ranks stay in sync, gradients are the ranks' average (head2 used on
//       one rank only, or under no_backward_sync only). --uncaught: the
//       error leaves main (rank R only, or every rank, skips head2).
//   fabric_multiprocess_program phases [--devices=N] [--strategy=S] [--disagree=one]
//       LoRA-style phases: the adapter only (base frozen before setup,
//       optimizer A), everything (optimizer B through setup_optimizer), the
//       base frozen again after setup; gradients are the ranks' average in
//       every step; ranks that change the set differently get an error.
//       --disagree=one: rank 1 alone changes it (the job must end).
//   fabric_multiprocess_program loose [--devices=N] [--strategy=S] [--precision=P]
//       [--bucket-cap-mb=M] [--setup=0|1]
//       an optimizer over parameters that no set-up model owns: a class
//       owning two modules made with new, trained by a generic Trainer whose
//       Adam is set up with fabric.setup_optimizer only (twice: train() makes
//       a new optimizer per call); rank 0's values after setup, gradients
//       the ranks' average, every step equal to a plain Adam step on the
//       averaged gradient (bit for bit with 1 process), ranks identical,
//       "*-true" precisions applied; one of the two modules set up as a
//       model afterwards (its parameters move to it); then one set-up model
//       plus a loose extra tensor in its optimizer. --setup=0: never set up
//       (the warnings must say so).
//   fabric_multiprocess_program banner [--devices=N] [--fail-rank=R]
//       prints a banner before launch() (once, from rank 0) and lines from
//       ranks 0 and 1 after it; rank R fails before launch() on stderr.
//   fabric_multiprocess_program rank_zero_file --dir=D [--devices=N]
//       a logger class of its own opens fabric::rank_zero_ofstream(path) in
//       its constructor, before and after launch(): rank 0's rows only.
//   fabric_multiprocess_program index_sampler [--devices=N]
//       fabric.index_sampler() and fabric.shard() over 1001 samples: the same
//       permutation on every rank, strided shares, padded to equal counts
//       or an exact partition, a new order each epoch; shard() of vectors
//       each rank shuffled with its own seed.
#include <fabric/fabric.h>

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Arguments {
  std::string scenario = "ddp";
  int devices = 2;
  int fail_rank = -1;
  int fail_step = 0;
  std::string fail_how = "exit";
  int steps = 3000;
  std::string dir;
  std::string phase;
  std::string strategy = "ddp";
  std::string precision = "32-true";
  double bucket_cap_mb = 25;
  int64_t fsdp_min_num_params = 1000000;
  std::string fsdp_state_dict_type = "sharded";
  bool find_unused = false;
  bool uncaught = false;
  int unused_rank = -1;
  int timeout_ms = 0;
  int stop_rank = -1;
  int stop_step = 0;
  double local_work_s = 5;
  int local_work_rank = 0;
  bool setup = true;
  int perturb_rank = -1;
  int perturb_step = 0;
  std::string collective;
  std::string path;
  std::string disagree;
  std::string environment;
  std::string how;
};

// --blocks: six layers in three blocks of two (block0.layer0, ...), as a
// transformer's blocks hold several weights: under fsdp with a unit per
// block, the middle block is brought back in the backward after both of its
// weights were saved, and its second weight is read after that.
bool square_net_blocks = false;
// --strided: layer0's weight is a transposed view (not contiguous), as a
// model that stores a weight as its transpose has: fsdp copies such a unit
// in and out instead of pointing it into the gathered buffer.
bool square_net_strided = false;

Arguments parse_arguments(int argc, char** argv) {
  Arguments arguments;
  if (argc > 1) arguments.scenario = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string argument = argv[i];
    const auto equals = argument.find('=');
    const std::string name = argument.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : argument.substr(equals + 1);
    if (name == "--devices") arguments.devices = std::stoi(value);
    if (name == "--fail-rank") arguments.fail_rank = std::stoi(value);
    if (name == "--fail-step") arguments.fail_step = std::stoi(value);
    if (name == "--fail-how") arguments.fail_how = value;
    if (name == "--steps") arguments.steps = std::stoi(value);
    if (name == "--dir") arguments.dir = value;
    if (name == "--phase") arguments.phase = value;
    if (name == "--strategy") arguments.strategy = value;
    if (name == "--precision") arguments.precision = value;
    if (name == "--bucket-cap-mb") arguments.bucket_cap_mb = std::stod(value);
    if (name == "--fsdp-min-num-params") arguments.fsdp_min_num_params = std::stoll(value);
    if (name == "--fsdp-state-dict-type") arguments.fsdp_state_dict_type = value;
    if (name == "--blocks") square_net_blocks = value == "1";
    if (name == "--strided") square_net_strided = value == "1";
    if (name == "--find-unused") arguments.find_unused = value == "1";
    if (name == "--uncaught") arguments.uncaught = value == "1";
    if (name == "--unused-rank") arguments.unused_rank = std::stoi(value);
    if (name == "--timeout-ms") arguments.timeout_ms = std::stoi(value);
    if (name == "--stop-rank") arguments.stop_rank = std::stoi(value);
    if (name == "--stop-step") arguments.stop_step = std::stoi(value);
    if (name == "--local-work-s") arguments.local_work_s = std::stod(value);
    if (name == "--local-work-rank") arguments.local_work_rank = std::stoi(value);
    if (name == "--setup") arguments.setup = value == "1";
    if (name == "--perturb-rank") arguments.perturb_rank = std::stoi(value);
    if (name == "--perturb-step") arguments.perturb_step = std::stoi(value);
    if (name == "--collective") arguments.collective = value;
    if (name == "--path") arguments.path = value;
    if (name == "--disagree") arguments.disagree = value;
    if (name == "--environment") arguments.environment = value;
    if (name == "--how") arguments.how = value;
  }
  return arguments;
}

int this_rank = -1;

[[noreturn]] void fail(const std::string& what) {
  // One fputs on unbuffered stderr: one write, not interleaved with other ranks.
  const std::string line = "CHECK FAILED on rank " + std::to_string(this_rank) + ": " + what + "\n";
  std::fputs(line.c_str(), stderr);
  std::exit(1);
}

void check(bool condition, const std::string& what) {
  if (!condition) fail(what);
}

// A small MLP with a buffer, so that setup's broadcast of buffers is checked.
struct NetImpl : torch::nn::Module {
  NetImpl()
      : first(register_module("first", torch::nn::Linear(8, 16))),
        second(register_module("second", torch::nn::Linear(16, 4))) {
    offset = register_buffer("offset", torch::randn({8}));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return second(torch::tanh(first(x + offset)));
  }
  torch::nn::Linear first;
  torch::nn::Linear second;
  torch::Tensor offset;
};
TORCH_MODULE(Net);

std::vector<torch::Tensor> module_state(torch::nn::Module& module) {
  std::vector<torch::Tensor> state;
  for (const auto& parameter : module.parameters()) state.push_back(parameter.detach());
  for (const auto& buffer : module.buffers()) state.push_back(buffer.detach());
  return state;
}

// A checkpoint path that no earlier run left behind (a process id comes
// again, and a failed run leaves its checkpoint), in `folder`.
std::string fresh_checkpoint_path(const std::string& folder, const std::string& stem) {
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return folder + "/fabric_" + stem + "_" + std::to_string(::getpid()) + "_" + std::to_string(now) + ".pt";
}

// Removes a checkpoint: one file, or the directory fsdp's sharded save
// writes, with everything under it. (POSIX, not std::filesystem: LibTorch
// 2.x's libtorch.so exports its own copies of its symbols.)
void remove_checkpoint(const std::string& path) {
  const auto remove_one = [](const char* entry, const struct stat*, int, struct FTW*) {
    return std::remove(entry) == 0 ? 0 : -1;
  };
  ::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

// Whether every rank holds exactly the same values in every tensor.
bool identical_across_ranks(fabric::Fabric& fabric, torch::nn::Module& module) {
  bool identical = true;
  for (const auto& tensor : module_state(module)) {
    const auto largest = fabric.all_reduce(tensor, fabric::ReduceOp::Max);
    const auto smallest = fabric.all_reduce(tensor, fabric::ReduceOp::Min);
    identical = identical && torch::equal(largest, smallest);
  }
  return identical;
}

void check_parameters_synchronized(fabric::Fabric& fabric) {
  const int rank = fabric.global_rank();
  torch::manual_seed(100 + rank);  // every rank builds a different model
  Net model;
  check(!identical_across_ranks(fabric, *model),
        "differently seeded ranks built identical models (the check would prove nothing)");
  torch::optim::SGD optimizer(model->parameters(), 0.05);
  fabric.setup(model, optimizer);
  check(identical_across_ranks(fabric, *model),
        "parameters or buffers differ across ranks after setup");

  const auto initial = model->first->weight.detach().clone();
  for (int step = 0; step < 5; ++step) {
    torch::manual_seed(1000 + 10 * rank + step);  // different data on every rank
    const auto input = torch::randn({6, 8});
    const auto loss = model->forward(input).pow(2).mean();
    optimizer.zero_grad();
    fabric.backward(loss);
    optimizer.step();
  }
  check(!torch::equal(initial, model->first->weight.detach()), "training did not change weights");
  check(identical_across_ranks(fabric, *model),
        "parameters differ across ranks after 5 optimizer steps");
}

// Buffers of types Gloo cannot broadcast itself (a transformer's causal mask
// is bool) reach every rank as rank 0's, exactly.
void check_buffers_of_every_type(fabric::Fabric& fabric) {
  struct MaskedImpl : torch::nn::Module {
    MaskedImpl() : linear(register_module("linear", torch::nn::Linear(4, 4))) {
      mask = register_buffer("mask", torch::rand({6, 6}) > 0.5);
      scale = register_buffer("scale", torch::randn({5}).to(torch::kBFloat16));
    }
    torch::nn::Linear linear;
    torch::Tensor mask, scale;
  };
  torch::manual_seed(300 + fabric.global_rank());  // a different mask on every rank
  auto model = std::make_shared<MaskedImpl>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  fabric.setup(model, optimizer);
  check(model->mask.scalar_type() == torch::kBool && model->scale.scalar_type() == torch::kBFloat16,
        "setup changed the buffers' types");
  const auto mask = fabric.all_gather(model->mask.to(torch::kByte).flatten());
  const auto scale = fabric.all_gather(model->scale.to(torch::kFloat));
  for (int64_t rank = 1; rank < fabric.world_size(); ++rank) {
    check(torch::equal(mask[rank], mask[0]), "a bool buffer differs from rank 0's after setup");
    check(torch::equal(scale[rank], scale[0]), "a bfloat16 buffer differs from rank 0's after setup");
  }
}

// DDP's averaged gradient of each rank's share of a global batch must equal
// the gradient of one model on the whole batch.
void check_gradients(fabric::Fabric& fabric, torch::Dtype dtype, double tolerance) {
  const int rank = fabric.global_rank();
  const int world = fabric.world_size();
  torch::manual_seed(7 + rank);
  Net model;
  model->to(dtype);
  fabric.setup(model);
  Net reference;  // not set up: plain single-process autograd
  reference->to(dtype);
  {
    torch::NoGradGuard no_grad;
    const auto from = module_state(*model);
    const auto to = module_state(*reference);
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  }
  const int64_t per_rank = 4;
  for (int iteration = 0; iteration < 3; ++iteration) {  // the 2nd rebuilds buckets
    torch::manual_seed(1234 + iteration);                 // the same batch on every rank
    const auto inputs = torch::randn({per_rank * world, 8}, dtype);
    const auto targets = torch::randn({per_rank * world, 4}, dtype);
    for (auto& parameter : model->parameters()) parameter.mutable_grad() = torch::Tensor();
    for (auto& parameter : reference->parameters()) parameter.mutable_grad() = torch::Tensor();

    const auto local_loss = torch::mse_loss(model->forward(inputs.narrow(0, rank * per_rank, per_rank)),
                                            targets.narrow(0, rank * per_rank, per_rank));
    fabric.backward(local_loss);
    torch::mse_loss(reference->forward(inputs), targets).backward();

    const auto parameters = model->named_parameters();
    const auto expected = reference->named_parameters();
    for (const auto& item : parameters) {
      const auto& gradient = item.value().grad();
      const auto& wanted = expected[item.key()].grad();
      check(gradient.defined(), "no gradient for " + item.key());
      const double error = (gradient - wanted).abs().max().item<double>();
      const double scale = wanted.abs().max().item<double>();
      if (error > tolerance * scale) {
        fail("gradient of " + item.key() + " (" + c10::toString(dtype) + ", iteration " +
             std::to_string(iteration) + ") differs from the single-process gradient: max error " +
             std::to_string(error) + ", max magnitude " + std::to_string(scale));
      }
    }
  }
}

// Samples that carry their own index as target.
struct IndexDataset : torch::data::datasets::Dataset<IndexDataset> {
  explicit IndexDataset(size_t count) : count(count) {}
  torch::data::Example<> get(size_t index) override {
    return {torch::full({2}, static_cast<double>(index)), torch::tensor(static_cast<int64_t>(index))};
  }
  c10::optional<size_t> size() const override { return count; }
  size_t count;
};

template <class Loader>
std::vector<int64_t> one_epoch(fabric::Fabric& fabric, Loader& loader) {
  std::vector<int64_t> indices;
  for (auto& batch : loader) {
    check(batch.data.device() == fabric.device(), "a batch is not on the Fabric's device");
    check(batch.target.dim() == 1, "unexpected batch shape");
    for (int64_t i = 0; i < batch.target.size(0); ++i) indices.push_back(batch.target[i].template item<int64_t>());
  }
  return indices;
}

// Every rank's indices of one epoch, in rank order.
std::vector<std::vector<int64_t>> gather_indices(fabric::Fabric& fabric,
                                                 const std::vector<int64_t>& local) {
  std::vector<std::vector<int64_t>> all;
  for (const auto& tensor : fabric.all_gather(torch::tensor(local, torch::kLong))) {
    const auto cpu = tensor.cpu();
    all.emplace_back(cpu.data_ptr<int64_t>(), cpu.data_ptr<int64_t>() + cpu.numel());
  }
  return all;
}

void check_partition(const std::vector<std::vector<int64_t>>& shards, size_t dataset_size,
                     const std::string& what) {
  std::set<int64_t> seen;
  size_t total = 0;
  for (const auto& shard : shards) {
    check(shard.size() == shards.front().size(), what + ": ranks got different numbers of samples");
    total += shard.size();
    seen.insert(shard.begin(), shard.end());
  }
  check(seen.size() == dataset_size && *seen.begin() == 0 &&
            *seen.rbegin() == static_cast<int64_t>(dataset_size) - 1,
        what + ": the shards do not cover the data set");
  if (dataset_size % shards.size() == 0) {
    check(total == dataset_size, what + ": the shards overlap");
  }
}

void check_exact_cover(const std::vector<std::vector<int64_t>>& shards, size_t size,
                       const std::string& what);

void check_samplers(fabric::Fabric& fabric) {
  namespace samplers = torch::data::samplers;
  using torch::data::transforms::Stack;
  const size_t world = static_cast<size_t>(fabric.world_size());
  const size_t size = 8 * world;

  auto random_loader = fabric.setup_dataloader<samplers::RandomSampler>(
      IndexDataset(size).map(Stack<>()), torch::data::DataLoaderOptions(5));
  const auto first = gather_indices(fabric, one_epoch(fabric, *random_loader));
  const auto second = gather_indices(fabric, one_epoch(fabric, *random_loader));
  check(random_loader->epoch() == 2, "the loader did not count two epochs");
  check_partition(first, size, "RandomSampler epoch 1");
  check_partition(second, size, "RandomSampler epoch 2");
  check(first != second, "RandomSampler: epoch 2 has the same order as epoch 1 (no set_epoch)");
  check(first[0].size() == 8, "RandomSampler: wrong shard size");

  auto sequential_loader = fabric.setup_dataloader<samplers::SequentialSampler>(
      IndexDataset(size).map(Stack<>()), 3);
  const auto sequential = gather_indices(fabric, one_epoch(fabric, *sequential_loader));
  check_partition(sequential, size, "SequentialSampler");
  for (size_t rank = 0; rank < world; ++rank) {
    check(std::is_sorted(sequential[rank].begin(), sequential[rank].end()),
          "SequentialSampler: a shard is not in order");
  }

  // A data set that does not divide evenly (issue 27 point 3). A loader
  // that feeds no backward pass (evaluation) hands out every sample exactly
  // once over all ranks; with batches of 4 over 8 * world + 1 samples the
  // ranks without the extra sample run one batch fewer.
  for (const bool shuffle : {true, false}) {
    const std::string what = shuffle ? "RandomSampler" : "SequentialSampler";
    std::vector<std::vector<int64_t>> exact;
    if (shuffle) {
      auto loader = fabric.setup_dataloader<samplers::RandomSampler>(IndexDataset(size + 1).map(Stack<>()), 4);
      exact = gather_indices(fabric, one_epoch(fabric, *loader));
      check_exact_cover(gather_indices(fabric, one_epoch(fabric, *loader)), size + 1,
                        what + ", evaluation loader, epoch 2");
    } else {
      auto loader = fabric.setup_dataloader<samplers::SequentialSampler>(IndexDataset(size + 1).map(Stack<>()), 4);
      exact = gather_indices(fabric, one_epoch(fabric, *loader));
    }
    check_exact_cover(exact, size + 1, what + ", evaluation loader over an uneven data set");
  }
  // A loader whose batches feed backward passes (training) pads the shares,
  // so that every rank runs the same number of steps; a rank with a step
  // fewer would leave the others waiting in the gradient all-reduce.
  torch::nn::Linear probe(2, 1);
  torch::optim::SGD probe_optimizer(probe->parameters(), 0.0);
  fabric.setup(probe, probe_optimizer);
  auto training_loader = fabric.setup_dataloader<samplers::SequentialSampler>(
      IndexDataset(size + 1).map(Stack<>()), 4);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> seen;
    int64_t steps = 0;
    for (auto& batch : *training_loader) {
      fabric.backward(probe->forward(batch.data).sum());
      for (int64_t i = 0; i < batch.target.size(0); ++i) seen.push_back(batch.target[i].item<int64_t>());
      ++steps;
    }
    check(fabric.all_reduce(torch::tensor(steps), fabric::ReduceOp::Max).item<int64_t>() == steps,
          "a training loader gave the ranks different numbers of steps");
    check_partition(gather_indices(fabric, seen), size + 1, "SequentialSampler, training loader");
  }
}

void check_collectives(fabric::Fabric& fabric) {
  const int rank = fabric.global_rank();
  const double world = fabric.world_size();
  const auto value = torch::tensor({rank + 1.0, 10.0 * (rank + 1)});
  const auto expect = [&](const torch::Tensor& actual, std::vector<double> wanted, const char* what) {
    check(torch::allclose(actual, torch::tensor(wanted, torch::kDouble).to(actual.dtype())),
          std::string("all_reduce ") + what + " gave " + c10::str(actual));
  };
  const double sum = world * (world + 1) / 2;
  expect(fabric.all_reduce(value, fabric::ReduceOp::Sum), {sum, 10 * sum}, "sum");
  expect(fabric.all_reduce(value, fabric::ReduceOp::Mean), {sum / world, 10 * sum / world}, "mean");
  expect(fabric.all_reduce(value), {sum / world, 10 * sum / world}, "default (mean)");
  expect(fabric.all_reduce(value, fabric::ReduceOp::Max), {world, 10 * world}, "max");
  expect(fabric.all_reduce(value, fabric::ReduceOp::Min), {1, 10}, "min");
  check(value[0].item<double>() == rank + 1.0, "all_reduce modified its input");

  const auto integer_sum = fabric.all_reduce(torch::tensor({int64_t{rank + 1}}), fabric::ReduceOp::Sum);
  check(integer_sum.scalar_type() == torch::kLong && integer_sum.item<int64_t>() == int64_t(sum),
        "integer all_reduce sum");
  const auto integer_mean = fabric.all_reduce(torch::tensor({int64_t{rank + 1}}));
  check(integer_mean.is_floating_point() && integer_mean.item<double>() == sum / world,
        "integer all_reduce mean");

  const int last = fabric.world_size() - 1;
  check(fabric.broadcast(torch::tensor({rank * 3}), last).item<int64_t>() == last * 3,
        "broadcast from the last rank");
  check(fabric.broadcast(std::string("text of rank ") + std::to_string(rank), 1) == "text of rank 1",
        "string broadcast");
  check(fabric.broadcast(std::string(rank == 0 ? "" : "not empty")).empty(), "empty string broadcast");

  // all_gather with a first dimension that differs per rank
  const auto gathered = fabric.all_gather(torch::full({rank + 1, 2}, static_cast<float>(rank)));
  check(static_cast<int>(gathered.size()) == fabric.world_size(), "all_gather size");
  for (int r = 0; r < fabric.world_size(); ++r) {
    check(gathered[r].size(0) == r + 1 && gathered[r].size(1) == 2 &&
              torch::all(gathered[r] == static_cast<float>(r)).item<bool>(),
          "all_gather piece of rank " + std::to_string(r) + " is " + c10::str(gathered[r]));
  }

  fabric.barrier();
  fabric.barrier("named");
  bool mismatch_reported = false;
  try {
    fabric.barrier(rank == 0 ? "left" : "right");
  } catch (const std::runtime_error& error) {
    const std::string message = error.what();
    mismatch_reported = message.find("'left'") != std::string::npos &&
                        message.find("'right'") != std::string::npos;
  }
  check(mismatch_reported, "barriers with different names were not reported with both names");
  fabric.barrier("after mismatch");  // the group still works
}

void check_checkpoint(fabric::Fabric& fabric) {
  torch::manual_seed(55 + fabric.global_rank());
  Net model;
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  const std::string path =
      fabric.broadcast(fresh_checkpoint_path("/tmp", "checkpoint"));
  fabric.save(path, model);
  check(std::ifstream(path).good(), "the checkpoint file does not exist on rank " +
                                        std::to_string(fabric.global_rank()));
  Net loaded;  // differently initialized on every rank
  fabric.load(path, loaded);
  const auto saved_state = module_state(*model);
  const auto loaded_state = module_state(*loaded);
  for (size_t i = 0; i < saved_state.size(); ++i) {
    check(torch::equal(saved_state[i], loaded_state[i]), "a loaded tensor differs from the saved one");
    check(loaded_state[i].device() == fabric.device(), "a loaded tensor is not on the device");
  }
  fabric.barrier("checkpoint read");
  if (fabric.is_global_zero()) remove_checkpoint(path);
}

// Gradient accumulation (issue 27 point 2): under no_backward_sync only the
// pass that steps all-reduces, and the result equals all-reducing every
// pass.
void check_accumulation(fabric::Fabric& fabric) {
  const auto run = [&](bool scoped) {
    torch::manual_seed(21);
    torch::nn::Linear model(4, 3);
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    fabric.setup(model, optimizer);
    torch::manual_seed(30 + fabric.global_rank());
    const uint64_t before = fabric.gradient_synchronizations();
    for (int step = 0; step < 3; ++step) {
      optimizer.zero_grad();
      for (int m = 0; m < 4; ++m) {
        auto no_sync = fabric.no_backward_sync(model, scoped && m + 1 < 4);
        fabric.backward(model->forward(torch::randn({5, 4})).pow(2).mean() / 4);
      }
      fabric.step(optimizer);
    }
    const uint64_t synchronizations = fabric.gradient_synchronizations() - before;
    check(synchronizations == (scoped ? 3u : 12u),
          "gradient accumulation: " + std::to_string(synchronizations) + " synchronizing backward passes in 3 steps of 4");
    return torch::cat({model->weight.detach().flatten(), model->bias.detach()});
  };
  const auto every = run(false);
  const auto scoped = run(true);
  check(torch::allclose(every, scoped, 1e-6, 1e-7), "accumulating under no_backward_sync changed the result");
}

// Reading gradients by hand under a sharded strategy (a norm for a log):
// a rank holds only its share, so the read fails where it lacks a
// parameter's, and the runtime says why first (the test checks its line);
// the total norm from fabric.clip_gradients equals the whole gradient's.
int run_gradient_read(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices).strategy(arguments.strategy));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(0);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  const torch::Tensor input = torch::randn({16, 8});  // the same on every rank: the average is its gradient
  const auto loss_of = [&] { return model->forward(input).pow(2).mean(); };
  loss_of().backward();
  double whole = 0;
  for (const auto& parameter : model->parameters()) whole += parameter.grad().pow(2).sum().item<double>();
  whole = std::sqrt(whole);
  optimizer.zero_grad();

  fabric.setup(model, optimizer);
  optimizer.zero_grad();
  fabric.backward(loss_of());
  bool failed = false;
  try {
    double norm = 0;
    for (const auto& parameter : model->parameters()) norm += parameter.grad().pow(2).sum().item<double>();
  } catch (const c10::Error&) {
    failed = true;
  }
  // zero2: every rank lacks some parameter's gradient; fsdp: a rank whose
  // chunk touches every parameter holds a piece of each (and would sum its
  // part: docs/runtime.md), the others lack some.
  const int64_t ranks_failed = fabric.all_reduce(int64_t{failed ? 1 : 0}, fabric::ReduceOp::Sum);
  const int64_t expected_failures = arguments.strategy == "zero2" ? fabric.world_size() : 1;
  check(ranks_failed >= expected_failures, std::to_string(ranks_failed) + " ranks failed to read every .grad() under '" +
                                               arguments.strategy + "'");
  const double total =
      fabric.clip_gradients(model, optimizer, c10::nullopt, 1e9).item<double>();
  check(std::abs(total - whole) <= 1e-5 * whole,
        "clip_gradients' total norm " + std::to_string(total) + " is not the whole gradient's " +
            std::to_string(whole));
  fabric.step(optimizer);
  fabric.print("gradient read checks passed on", fabric.world_size(), "ranks");
  return 0;
}

// A cluster environment a program brings itself, as one written for MPICH's
// Hydra launcher (mpiexec.hydra) would be: its ranks from PMI_RANK and
// PMI_SIZE, the rendezvous address from the job script's MASTER_ADDR/PORT.
struct HydraEnvironment : fabric::ClusterEnvironment {
  std::string name() const override { return "hydra"; }
  std::optional<fabric::ClusterPlacement> detect() const override {
    const char* rank = std::getenv("PMI_RANK");
    const char* size = std::getenv("PMI_SIZE");
    if (rank == nullptr || size == nullptr) return std::nullopt;
    const auto number = [](const char* name, int otherwise) {
      const char* value = std::getenv(name);
      return value != nullptr && *value != '\0' ? std::stoi(value) : otherwise;
    };
    fabric::ClusterPlacement placement;
    placement.global_rank = std::stoi(rank);
    placement.world_size = std::stoi(size);
    placement.local_rank = number("MPI_LOCALRANKID", placement.global_rank);
    placement.local_world_size = number("MPI_LOCALNRANKS", placement.world_size);
    placement.node_rank = placement.global_rank / placement.local_world_size;
    if (const char* address = std::getenv("MASTER_ADDR")) placement.main_address = address;
    placement.main_port = number("MASTER_PORT", 29500);
    return placement;
  }
};

int run_ddp_checks(const Arguments& arguments) {
  fabric::Options options = fabric::Options().accelerator("cpu").devices(arguments.devices);
  if (arguments.environment == "hydra") options.cluster_environment(std::make_shared<HydraEnvironment>());
  fabric::Fabric fabric(options);
  fabric.launch();
  this_rank = fabric.global_rank();
  check(fabric.world_size() == arguments.devices, "world size");
  check(fabric.local_rank() == fabric.global_rank() && fabric.node_rank() == 0, "ranks");

  check_parameters_synchronized(fabric);
  check_buffers_of_every_type(fabric);
  check_gradients(fabric, torch::kDouble, 1e-6);
  check_gradients(fabric, torch::kFloat, 1e-5);
  check_samplers(fabric);
  check_accumulation(fabric);
  check_collectives(fabric);
  check_checkpoint(fabric);
  fabric.print("ddp checks passed on", fabric.world_size(), "ranks");
  return 0;
}

int run_until_failure(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  this_rank = fabric.global_rank();  // known before launch() from the launcher's env
  if (arguments.fail_step < 0 && this_rank == arguments.fail_rank) std::exit(0);
  fabric.launch();
  torch::manual_seed(3);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  for (int step = 0; step < arguments.steps; ++step) {
    const auto loss = model->forward(torch::randn({32, 8})).pow(2).mean();
    optimizer.zero_grad();
    fabric.backward(loss);
    optimizer.step();
    if (this_rank == arguments.fail_rank && step == arguments.fail_step) {
      // Both streams, as a program's error path writes them (the launcher
      // prefixes a rank's lines with its rank; rank 0's stay as they are).
      std::cout << "test: rank " << this_rank << " reached step " << step << std::endl;
      std::fprintf(stderr, "test: rank %d fails now (%s)\n", this_rank, arguments.fail_how.c_str());
      if (arguments.fail_how == "sigkill") std::raise(SIGKILL);
      if (arguments.fail_how == "abort") std::abort();
      if (arguments.fail_how == "throw") throw std::runtime_error("test exception");
      std::exit(3);
    }
  }
  fabric.print("finished", arguments.steps, "steps without a failure");
  return 0;
}

// ---- fabric-run -------------------------------------------------------------

int run_argv_report(int argc, char** argv) {
  fabric::Fabric fabric;
  fabric.launch();
  this_rank = fabric.global_rank();
  check(argc >= 3, "argv: no output directory");
  const std::string prefix = std::string(argv[2]) + "/rank" + std::to_string(this_rank);
  {
    std::ofstream out(prefix + ".argv", std::ios::binary);
    for (int i = 3; i < argc; ++i) out << argv[i] << '\0';
  }
  std::ofstream out(prefix + ".env");
  for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                           "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "LT_ACCELERATOR",
                           "LT_DEVICES", "LT_STRATEGY", "LT_PRECISION", "LT_NUM_NODES"}) {
    const char* value = std::getenv(name);
    out << name << "=" << (value != nullptr ? value : "<unset>") << "\n";
  }
  out << "world_size()=" << fabric.world_size() << "\n";
  fabric.barrier("argv written");
  return 0;
}

// ---- checkpoints of the whole state, training utilities -----------------------

template <class Function>
std::string error_of(Function&& function) {
  try {
    function();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "";
}

void check_error(const std::string& error, const std::string& expected, const std::string& what) {
  check(!error.empty(), what + ": no exception");
  check(error.find(expected) != std::string::npos,
        what + ": the message '" + error + "' lacks '" + expected + "'");
}

void check_same_state(torch::nn::Module& a, torch::nn::Module& b, const std::string& what) {
  const auto from = module_state(a);
  const auto to = module_state(b);
  for (size_t i = 0; i < from.size(); ++i) check(torch::equal(from[i], to[i]), what);
}

void train_steps(fabric::Fabric& fabric, Net& model, torch::optim::Optimizer& optimizer,
                 int first_step, int count, bool print_losses) {
  for (int step = first_step; step < first_step + count; ++step) {
    // Data depends on (step, rank) only, so a resumed run sees the same.
    torch::manual_seed(500 + 10 * step + fabric.global_rank());
    const auto input = torch::randn({8, 8});
    const auto target = torch::randn({8, 4});
    optimizer.zero_grad();
    const auto loss = torch::mse_loss(model->forward(input), target);
    fabric.backward(loss);
    fabric.step(optimizer);  // optimizer.step() under ddp
    if (print_losses) fabric.printf("step %d loss %a\n", step, loss.item<double>());
  }
}

void check_state_checkpoints(fabric::Fabric& fabric, const std::string& dir) {
  torch::manual_seed(21 + fabric.global_rank());
  Net model;
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  train_steps(fabric, model, optimizer, 0, 2, false);
  int64_t step = 2;
  double best = 0.25;
  std::string note = "text with spaces";
  bool flag = true;
  int32_t epoch = 7;
  torch::Tensor extra = torch::arange(6, torch::kFloat).reshape({2, 3});
  const std::string path = dir + "/state.ckpt";
  fabric::State state{{"model", model}, {"optimizer", optimizer}, {"step", step}, {"best", best},
                      {"note", note},   {"flag", flag},           {"epoch", epoch}, {"extra", extra}};
  fabric.save(path, state);

  torch::manual_seed(99 + fabric.global_rank());
  Net other_model;
  torch::optim::Adam other_optimizer(other_model->parameters(), 0.01);
  fabric.setup(other_model, other_optimizer);
  int64_t other_step = 0;
  double other_best = 0;
  std::string other_note;
  bool other_flag = false;
  int32_t other_epoch = 0;
  torch::Tensor other_extra;
  fabric::State other{{"model", other_model}, {"optimizer", other_optimizer},
                      {"step", other_step},   {"best", other_best},
                      {"note", other_note},   {"flag", other_flag},
                      {"epoch", other_epoch}, {"extra", other_extra}};
  fabric.load(path, other);
  check_same_state(*model, *other_model, "a loaded model tensor differs from the saved one");
  for (const auto& tensor : module_state(*other_model)) {
    check(tensor.device() == fabric.device(), "a loaded tensor is not on the device");
  }
  check(other_step == 2 && other_best == 0.25 && other_note == note && other_flag &&
            other_epoch == 7 && torch::equal(other_extra, extra),
        "plain values did not round-trip");
  // The optimizer state came along: one more identical step keeps both equal.
  train_steps(fabric, model, optimizer, 2, 1, false);
  train_steps(fabric, other_model, other_optimizer, 2, 1, false);
  check_same_state(*model, *other_model, "optimizer state did not round-trip (Adam moments)");

  // Errors are clear and leave the objects alone.
  int64_t untouched = 42;
  check_error(error_of([&] { fabric.load(path, {{"model", other_model}, {"missing", untouched}}); }),
              "has no 'missing'", "missing key");
  check(untouched == 42, "a failed load modified a value");
  check_error(error_of([&] { fabric.load(path, {{"model", other_model}}); }),
              "also holds 'optimizer'", "unknown keys (strict)");
  int64_t just_step = 0;
  fabric.load(path, {{"step", just_step}}, /*strict=*/false);
  check(just_step == 2, "non-strict load of one value");
  std::string wrong_kind;
  check_error(error_of([&] { fabric.load(path, {{"step", wrong_kind}}, false); }),
              "'step' holds a int64 in the checkpoint, but a string", "kind mismatch");
  check_error(error_of([&] { fabric::State twice{{"a", step}, {"a", step}}; }), "appears twice",
              "duplicate names");
  check_error(error_of([&] { fabric.load(dir + "/does-not-exist.ckpt", state); }),
              "No such file", "missing file");
  const std::string truncated = dir + "/truncated.ckpt";
  const std::string garbage = dir + "/garbage.ckpt";
  if (fabric.is_global_zero()) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() * 2 / 3);
    std::ofstream(garbage, std::ios::binary) << std::string(4096, 'x');
  }
  fabric.barrier("corrupted files written");
  check_error(error_of([&] { fabric.load(truncated, state); }), "truncated or corrupted",
              "truncated file");
  check_error(error_of([&] { fabric.load(garbage, state); }), "truncated or corrupted",
              "garbage file");
  const std::string single = dir + "/single.pt";
  fabric.save(single, model);
  check_error(error_of([&] { fabric.load(single, state); }), "not a fabric::State checkpoint",
              "single-object checkpoint loaded as a State");
  // A set-up model loaded from a single-object checkpoint still trains in
  // sync (its parameters keep the storage its Reducer watches).
  fabric.load(single, other_model);
  check_same_state(*model, *other_model, "single-object load into a set-up model");
  train_steps(fabric, other_model, other_optimizer, 3, 2, false);
  check(identical_across_ranks(fabric, *other_model),
        "ranks drift apart after loading a single-object checkpoint into a set-up model");

  // A symlink planted at the temporary path is replaced, not written through.
  const std::string victim = dir + "/victim.txt";
  if (fabric.is_global_zero()) {
    std::ofstream(victim) << "precious";
    check(::symlink(victim.c_str(), (path + ".tmp").c_str()) == 0, "cannot plant the symlink");
  }
  fabric.barrier("symlink planted");
  fabric.save(path, state);
  std::ifstream victim_file(victim);
  const std::string victim_text((std::istreambuf_iterator<char>(victim_file)),
                                std::istreambuf_iterator<char>());
  check(victim_text == "precious", "save wrote through a symlink at the temporary path");
  fabric.load(path, other);
  fabric.barrier("state checks done");
}

void check_no_backward_sync(fabric::Fabric& fabric) {
  const int rank = fabric.global_rank();
  const int world = fabric.world_size();
  torch::manual_seed(5);
  Net model;
  model->to(torch::kDouble);
  fabric.setup(model);
  Net reference;
  reference->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    const auto from = module_state(*model);
    const auto to = module_state(*reference);
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  }
  const int micro_batches = 3;
  const auto batch = [&](int r, int i) {
    torch::manual_seed(700 + 10 * r + i);
    return std::make_pair(torch::randn({4, 8}, torch::kDouble), torch::randn({4, 4}, torch::kDouble));
  };
  for (int i = 0; i < micro_batches; ++i) {
    const auto [input, target] = batch(rank, i);
    const auto loss = torch::mse_loss(model->forward(input), target);
    const bool last = i == micro_batches - 1;
    auto no_sync = fabric.no_backward_sync(model, /*enabled=*/!last);
    fabric.backward(loss);
    if (i == micro_batches - 2) {
      // Still local: ranks saw different data, so their sums differ.
      const auto gradient = model->first->weight.grad();
      check(!torch::equal(fabric.all_reduce(gradient, fabric::ReduceOp::Max),
                          fabric.all_reduce(gradient, fabric::ReduceOp::Min)),
            "no_backward_sync: gradients were synchronized inside the guard");
    }
  }
  // Reference: the mean over ranks of each rank's sum over micro-batches.
  for (int r = 0; r < world; ++r) {
    for (int i = 0; i < micro_batches; ++i) {
      const auto [input, target] = batch(r, i);
      (torch::mse_loss(reference->forward(input), target) / world).backward();
    }
  }
  const auto expected = reference->named_parameters();
  for (const auto& item : model->named_parameters()) {
    const auto error = (item.value().grad() - expected[item.key()].grad()).abs().max().item<double>();
    check(error < 1e-12, "accumulated gradient of " + item.key() + " differs from the large-batch "
                         "gradient by " + std::to_string(error));
  }
  check_error(error_of([&] {
                Net never_set_up;
                auto guard = fabric.no_backward_sync(never_set_up);
              }),
              "was not set up", "no_backward_sync on a model that was not set up");
}

void check_clip_gradients(fabric::Fabric& fabric) {
  torch::manual_seed(8);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  fabric.setup(model, optimizer);
  torch::manual_seed(80 + fabric.global_rank());
  fabric.backward(model->forward(torch::randn({16, 8})).pow(2).sum());
  double squares = 0;
  for (const auto& parameter : model->parameters()) squares += parameter.grad().pow(2).sum().item<double>();
  const double hand_norm = std::sqrt(squares);
  const double max_norm = hand_norm / 4;
  const auto norm = fabric.clip_gradients(model, optimizer, c10::nullopt, max_norm);
  check(std::abs(norm.item<double>() - hand_norm) < 1e-4 * hand_norm,
        "clip_gradients returned " + std::to_string(norm.item<double>()) + ", by hand " +
            std::to_string(hand_norm));
  check(torch::equal(fabric.all_reduce(norm, fabric::ReduceOp::Max),
                     fabric.all_reduce(norm, fabric::ReduceOp::Min)),
        "clip_gradients: the norm differs across ranks");
  double clipped = 0;
  for (const auto& parameter : model->parameters()) clipped += parameter.grad().pow(2).sum().item<double>();
  check(std::abs(std::sqrt(clipped) - max_norm) < 1e-3 * max_norm, "the clipped norm is not max_norm");
  fabric.clip_gradients(model, optimizer, 1e-3);
  for (const auto& parameter : model->parameters()) {
    check(parameter.grad().abs().max().item<double>() <= 1e-3 + 1e-9, "clip_val did not clamp");
  }
  check_error(error_of([&] { fabric.clip_gradients(model, optimizer); }), "exactly one",
              "clip_gradients without a limit");
}

void check_rank_zero_first(fabric::Fabric& fabric, const std::string& dir) {
  const std::string marker = dir + "/rank_zero_was_here";
  {
    auto first = fabric.rank_zero_first();
    if (fabric.is_global_zero()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::ofstream(marker) << "done";
    } else {
      check(std::ifstream(marker).good(), "rank_zero_first: a rank entered before rank 0 left");
    }
  }
  check(std::ifstream(marker).good(), "rank_zero_first: no marker after the scope");
}

void check_seed_everything() {
  check(fabric::seed_everything(1234) == 1234, "seed_everything's result");
  const auto first = torch::randn({4});
  const int first_rand = std::rand();
  fabric::seed_everything(1234);
  check(torch::equal(first, torch::randn({4})) && std::rand() == first_rand,
        "seed_everything does not reproduce the random numbers");
  check(std::string(std::getenv("PL_GLOBAL_SEED")) == "1234", "PL_GLOBAL_SEED");
}

int run_state_checks(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  check(!arguments.dir.empty(), "--dir is needed");
  check_state_checkpoints(fabric, arguments.dir);
  check_no_backward_sync(fabric);
  check_clip_gradients(fabric);
  check_rank_zero_first(fabric, arguments.dir);
  check_seed_everything();
  fabric.print("state checks passed on", fabric.world_size(), "ranks");
  return 0;
}

std::pair<int64_t, int64_t> adam_state(const torch::optim::Adam& optimizer);

int run_resume(const Arguments& arguments) {
  fabric::Fabric fabric(
      fabric::Options().accelerator("cpu").devices(arguments.devices).strategy(arguments.strategy));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(31);
  Net model;
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  int64_t step = 0;
  fabric::State state{{"model", model}, {"optimizer", optimizer}, {"step", step}};
  const std::string path = arguments.dir + "/resume.ckpt";
  if (arguments.phase == "full") {
    train_steps(fabric, model, optimizer, 0, 8, true);
  } else if (arguments.phase == "first") {
    train_steps(fabric, model, optimizer, 0, 4, true);
    step = 4;
    fabric.save(path, state);
  } else if (arguments.phase == "second") {
    fabric.load(path, state);
    train_steps(fabric, model, optimizer, static_cast<int>(step), 4, true);
  } else if (arguments.phase == "reload") {
    // A checkpoint of another rank count (fsdp: other owners): the set-up
    // model holds exactly what a plain model loads from the file, the ranks'
    // optimizer shards add up to the file's state, and training goes on.
    fabric.load(path, state);
    Net plain;
    torch::optim::Adam plain_optimizer(plain->parameters(), 0.01);
    int64_t plain_step = 0;
    fabric.load(path, {{"model", plain}, {"optimizer", plain_optimizer}, {"step", plain_step}});
    check_same_state(*model, *plain, "the loaded model differs from the checkpoint");
    const auto held = fabric.all_reduce(torch::tensor(adam_state(optimizer).first), fabric::ReduceOp::Sum);
    check(held.item<int64_t>() == adam_state(plain_optimizer).first,
          "the ranks' optimizer state after load does not add up to the checkpoint's");
    train_steps(fabric, model, optimizer, static_cast<int>(step), 2, true);
    // The consolidated export: one file plain torch::load reads.
    const std::string exported = arguments.dir + "/export_" + std::to_string(fabric.world_size()) + ".pt";
    fabric.save(exported, model);
    Net inference;
    torch::load(inference, exported);
    check_same_state(*model, *inference, "the exported model differs from the trained one");
    fabric.print("reloaded on", fabric.world_size(), "ranks: model, optimizer shards and export agree");
  } else {
    fail("unknown --phase");
  }
  check(identical_across_ranks(fabric, *model), "ranks differ after training");
  return 0;
}

int run_save_twice(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(41);
  Net model;
  fabric.setup(model);
  int64_t step = 1;
  fabric::State state{{"model", model}, {"step", step}};
  const std::string path = arguments.dir + "/twice.ckpt";
  fabric.save(path, state);
  step = 2;
  ::setenv("FABRIC_TEST_PAUSE_BEFORE_RENAME_S", "60", 1);
  fabric.save(path, state);  // the test kills rank 0 while it pauses
  fabric.print("the second save was not interrupted");
  return 0;
}

int run_logging(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options()
                            .accelerator("cpu")
                            .devices(arguments.devices)
                            .logger(fabric::CSVLogger(arguments.dir, "csv"))
                            .logger(fabric::TensorBoardLogger(arguments.dir, "tb")));
  fabric.launch();
  this_rank = fabric.global_rank();
  const int rank = fabric.global_rank();
  for (int step = 0; step < 3; ++step) {
    fabric.log("loss", 1.5 + rank + step, step);
    fabric.log_dict({{"acc", 0.25 * (rank + 1) + step}, {"lr", 0.125}}, step);
  }
  fabric.log("loss", torch::tensor(9.0 + rank), 10);
  fabric.barrier("logged");
  return 0;
}

int run_scaler_checks(const Arguments& arguments) {
  fabric::Options::GradScalerOptions scaler;
  scaler.init_scale = 1024;
  scaler.growth_interval = 2;
  fabric::Fabric fabric(
      fabric::Options().accelerator("cpu").devices(arguments.devices).precision("16-mixed").grad_scaler(scaler));
  fabric.launch();
  this_rank = fabric.global_rank();
  const int rank = fabric.global_rank();
  torch::manual_seed(61);
  Net model;
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  const auto batch = [&](int step) {
    torch::manual_seed(900 + 10 * step + rank);  // different data per rank
    return torch::randn({6, 8});
  };

  // Step 0, clean: gradients come back unscaled and reduced: they equal the
  // mean over ranks of plain fp32 gradients of each rank's batch.
  optimizer.zero_grad();
  fabric.backward(model->forward(batch(0)).pow(2).mean());
  Net plain;
  {
    torch::NoGradGuard no_grad;
    const auto from = module_state(*model);
    const auto to = module_state(*plain);
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  }
  plain->forward(batch(0)).pow(2).mean().backward();
  const auto expected = fabric.all_reduce(plain->first->weight.grad(), fabric::ReduceOp::Mean);
  check(torch::allclose(model->first->weight.grad(), expected, 1e-5, 1e-7),
        "16-mixed gradients are not the unscaled mean of the ranks' gradients");
  optimizer.step();
  check(fabric.loss_scale() == 1024, "the scale changed after one clean step");

  // Step 1: an inf on the last rank only. Every rank must skip.
  const auto weights = model->first->weight.detach().clone();
  optimizer.zero_grad();
  auto loss = model->forward(batch(1)).pow(2).mean();
  if (rank == fabric.world_size() - 1) loss = loss * std::numeric_limits<float>::infinity();
  fabric.backward(loss);
  check(!model->first->weight.grad().defined(), "a rank kept inf gradients");
  optimizer.step();
  check(torch::equal(weights, model->first->weight), "a rank stepped on inf gradients");
  check(fabric.loss_scale() == 512, "the scale did not halve on every rank");
  for (int step = 2; step < 4; ++step) {
    optimizer.zero_grad();
    fabric.backward(model->forward(batch(step)).pow(2).mean());
    optimizer.step();
  }
  check(fabric.loss_scale() == 1024, "the scale did not grow after growth_interval clean steps");
  check(identical_across_ranks(fabric, *model), "ranks differ after 16-mixed training");

  // Gradients accumulated over several passes without zero_grad (two
  // synchronized ones, one under no_backward_sync, one more synchronized)
  // are unscaled once each, though the scale grows in between: they equal
  // the mean over ranks of the four plain fp32 gradients' sum.
  {
    Net plain_sum;
    {
      torch::NoGradGuard no_grad;
      const auto from = module_state(*model);
      const auto to = module_state(*plain_sum);
      for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
    }
    optimizer.zero_grad();
    fabric.backward(model->forward(batch(4)).pow(2).mean());
    fabric.backward(model->forward(batch(5)).pow(2).mean());
    {
      auto no_sync = fabric.no_backward_sync(model);
      fabric.backward(model->forward(batch(6)).pow(2).mean());
    }
    fabric.backward(model->forward(batch(7)).pow(2).mean());
    for (int step = 4; step < 8; ++step) plain_sum->forward(batch(step)).pow(2).mean().backward();
    const auto summed = fabric.all_reduce(plain_sum->first->weight.grad(), fabric::ReduceOp::Mean);
    check(torch::allclose(model->first->weight.grad(), summed, 1e-5, 1e-6),
          "16-mixed gradients accumulated over several backward passes are not the mean of the plain sums "
          "(off by " +
              std::to_string((model->first->weight.grad() - summed).abs().max().item<double>()) + ")");
    optimizer.step();
  }
  check_accumulation(fabric);
  fabric.print("scaler checks passed on", fabric.world_size(), "ranks");
  return 0;
}

// ---- sharded strategies (zero1, zero2) -----------------------------------------

// Four equal layers, so that a greedy split by size gives each of 2 ranks
// exactly half of the parameters' bytes.
struct SquareNetImpl : torch::nn::Module {
  SquareNetImpl() {
    for (int i = 0; i < (square_net_blocks ? 6 : 4); ++i) {
      torch::nn::Linear layer(32, 32);
      const std::string name = "layer" + std::to_string(i);
      if (!square_net_blocks) {
        layers.push_back(register_module(name, layer));
        continue;
      }
      if (i % 2 == 0) blocks.push_back(register_module("block" + std::to_string(i / 2), std::make_shared<torch::nn::Module>()));
      layers.push_back(blocks.back()->register_module(name, layer));
    }
    if (square_net_strided) {
      auto& first = layers.front();
      torch::NoGradGuard no_grad;
      first->weight.set_data(first->weight.detach().t().contiguous().t());
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (size_t i = 0; i < layers.size(); ++i) {
      x = layers[i](x);
      if (i + 1 < layers.size()) x = torch::tanh(x);
    }
    return x;
  }
  std::vector<torch::nn::Linear> layers;
  std::vector<std::shared_ptr<torch::nn::Module>> blocks;
};
TORCH_MODULE(SquareNet);

// Bytes of the tensors an Adam holds, and for how many parameters.
std::pair<int64_t, int64_t> adam_state(const torch::optim::Adam& optimizer) {
  int64_t bytes = 0;
  int64_t count = 0;
  for (const auto& item : optimizer.state()) {
    const auto& state = static_cast<const torch::optim::AdamParamState&>(*item.second);
    for (const auto& tensor : {state.exp_avg(), state.exp_avg_sq(), state.max_exp_avg_sq()}) {
      if (tensor.defined()) bytes += tensor.numel() * tensor.element_size();
    }
    ++count;
  }
  return {bytes, count};
}

void copy_state(torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  const auto source = module_state(from);
  const auto target = module_state(to);
  for (size_t i = 0; i < source.size(); ++i) target[i].copy_(source[i]);
}

double max_relative_difference(torch::nn::Module& a, torch::nn::Module& b) {
  const auto left = module_state(a);
  const auto right = module_state(b);
  double worst = 0;
  for (size_t i = 0; i < left.size(); ++i) {
    const double scale = std::max(1e-3, right[i].abs().max().item<double>());
    worst = std::max(worst, (left[i] - right[i]).abs().max().item<double>() / scale);
  }
  return worst;
}

// A micro-batch under no_backward_sync reaches a head that the
// synchronizing pass does not (each head its own fsdp unit at
// --fsdp-min-num-params=1000): its accumulated gradient is still averaged
// and stepped, as ddp's would be.
void check_accumulation_unreached(fabric::Fabric& fabric) {
  struct Heads : torch::nn::Module {
    Heads()
        : body(register_module("body", torch::nn::Linear(8, 64))),
          head1(register_module("head1", torch::nn::Linear(64, 32))),
          head2(register_module("head2", torch::nn::Linear(64, 32))) {}
    torch::Tensor forward(const torch::Tensor& x, bool use_head2) {
      const auto hidden = torch::tanh(body(x));
      return use_head2 ? head2(hidden) : head1(hidden);
    }
    torch::nn::Linear body, head1, head2;
  };
  torch::manual_seed(71);
  auto model = std::make_shared<Heads>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  fabric.setup(model, optimizer);
  Heads plain;
  copy_state(*model, plain);
  torch::manual_seed(80 + fabric.global_rank());  // every rank its own data
  const auto first = torch::randn({5, 8});
  const auto second = torch::randn({5, 8});
  optimizer.zero_grad();
  {
    auto no_sync = fabric.no_backward_sync(model);
    fabric.backward(model->forward(first, true).pow(2).mean());
  }
  fabric.backward(model->forward(second, false).pow(2).mean());
  fabric.step(optimizer);
  plain.forward(first, true).pow(2).mean().backward();
  plain.forward(second, false).pow(2).mean().backward();
  {
    torch::NoGradGuard no_grad;
    for (auto& parameter : plain.parameters()) {
      parameter.sub_(0.1 * fabric.all_reduce(parameter.grad(), fabric::ReduceOp::Mean));
    }
  }
  const double difference = max_relative_difference(*model, plain);
  check(difference < 1e-5, "a gradient accumulated under no_backward_sync in a part the synchronizing pass does not "
                           "reach differs from the ranks' average after the step by " +
                               std::to_string(difference));
  check(identical_across_ranks(fabric, *model), "ranks differ after accumulating into an unreached part");
}

// fsdp on several ranks: a parameter's gradient is this rank's piece of it
// flattened (undefined where it holds none), the ranks' pieces in rank
// order. Where each of `gradients` starts in its parameter.
std::vector<int64_t> piece_offsets(fabric::Fabric& fabric, const std::vector<torch::Tensor>& gradients) {
  const auto count = static_cast<int64_t>(gradients.size());
  auto lengths = torch::zeros({fabric.world_size(), count}, torch::kDouble);
  for (int64_t i = 0; i < count; ++i) {
    const auto& gradient = gradients[static_cast<size_t>(i)];
    lengths[fabric.global_rank()][i] = gradient.defined() ? static_cast<double>(gradient.numel()) : 0.0;
  }
  lengths = fabric.all_reduce(lengths, fabric::ReduceOp::Sum);
  std::vector<int64_t> offsets;
  for (int64_t i = 0; i < count; ++i) {
    offsets.push_back(
        static_cast<int64_t>(lengths.narrow(0, 0, fabric.global_rank()).select(1, i).sum().item<double>()));
  }
  return offsets;
}

// The part of `whole` that `piece` (a gradient under fsdp) holds.
torch::Tensor piece_of(const torch::Tensor& whole, const torch::Tensor& piece, int64_t offset) {
  return whole.reshape({-1}).narrow(0, offset, piece.numel());
}

// The sharded run against plain LibTorch on the whole global batch (what
// ddp computes, as run_ddp_checks proves): same parameters after several
// Adam steps, identical on every rank, ~1/N of the optimizer state and,
// for zero2, of the gradients; then a checkpoint round trip that resumes
// exactly, and optimizer.step() called directly caught with a clear error.
int run_zero_checks(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options()
                            .accelerator("cpu")
                            .devices(arguments.devices)
                            .strategy(arguments.strategy)
                            .precision(arguments.precision)
                            .bucket_cap_mb(arguments.bucket_cap_mb)
                            .fsdp_min_num_params(arguments.fsdp_min_num_params)
                            .fsdp_state_dict_type(arguments.fsdp_state_dict_type));
  fabric.launch();
  this_rank = fabric.global_rank();
  const std::string& strategy = fabric.options().strategy();
  check(strategy == "zero1" || strategy == "zero2" || strategy == "fsdp", "not a sharded strategy: " + strategy);
  const bool stage2 = strategy != "zero1";  // gradients on their owners only
  const bool fsdp = strategy == "fsdp";
  const bool scaled = arguments.precision == "16-mixed";
  const int rank = fabric.global_rank();
  const int world = fabric.world_size();

  torch::manual_seed(17 + rank);  // different on every rank: setup broadcasts rank 0's
  SquareNet model;
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  SquareNet reference;  // not set up: one process, the whole batch
  copy_state(*model, *reference);
  torch::optim::Adam reference_optimizer(reference->parameters(), 0.01);
  const auto parameters = model->named_parameters();
  const auto reference_parameters = reference->named_parameters();

  const int64_t per_rank = 4;
  const auto batch = [&](int step) {
    torch::manual_seed(300 + step);  // the same global batch on every rank
    return std::make_pair(torch::randn({per_rank * world, 32}), torch::randn({per_rank * world, 32}));
  };
  const auto local_loss = [&](int step) {
    const auto [inputs, targets] = batch(step);
    return torch::mse_loss(model->forward(inputs.narrow(0, rank * per_rank, per_rank)),
                           targets.narrow(0, rank * per_rank, per_rank));
  };
  const auto reference_step = [&](int step) {
    const auto [inputs, targets] = batch(step);
    reference_optimizer.zero_grad();
    torch::mse_loss(reference->forward(inputs), targets).backward();
    reference_optimizer.step();
  };

  const int steps = 6;
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    if (step % 2 == 1) {
      // The closure overload, as LBFGS-style code writes it.
      fabric.step(optimizer, [&] {
        optimizer.zero_grad();
        auto loss = local_loss(step);
        fabric.backward(loss);
        return loss;
      });
      reference_step(step);
      continue;
    }
    fabric.backward(local_loss(step));
    {
      const auto [inputs, targets] = batch(step);
      reference->zero_grad();
      torch::mse_loss(reference->forward(inputs), targets).backward();
    }
    // Who holds which gradient: zero2, each parameter's on its owner only;
    // fsdp, each element's on one rank (a piece of the parameter's);
    // zero1, every gradient everywhere. Held gradients are the average.
    const bool pieces = fsdp && world > 1;
    std::vector<torch::Tensor> gradients;
    for (const auto& item : parameters) gradients.push_back(item.value().grad());
    const auto offsets = piece_offsets(fabric, gradients);
    int64_t local_count = 0;
    std::vector<double> holders;
    for (size_t i = 0; i < parameters.size(); ++i) {
      const auto& item = parameters[i];
      const auto& gradient = gradients[i];
      holders.push_back(gradient.defined() ? (pieces ? static_cast<double>(gradient.numel()) : 1.0) : 0.0);
      if (!gradient.defined()) continue;
      local_count += pieces ? gradient.numel() : 1;
      auto wanted = reference_parameters[item.key()].grad();
      if (pieces) {
        check(gradient.dim() == 1, "fsdp: the gradient of " + item.key() + " is not a flat piece");
        wanted = piece_of(wanted, gradient, offsets[i]);
      }
      check(torch::allclose(gradient, wanted, 1e-4, 1e-6),
            "the gradient of " + item.key() + " is not the average over ranks");
    }
    const auto counts = fabric.all_reduce(torch::tensor(holders, torch::kDouble), fabric::ReduceOp::Sum);
    int64_t elements = 0;
    for (size_t i = 0; i < holders.size(); ++i) {
      elements += parameters[i].value().numel();
      const double wanted = pieces   ? static_cast<double>(parameters[i].value().numel())
                            : stage2 ? 1.0
                                     : static_cast<double>(world);
      check(counts[static_cast<int64_t>(i)].item<double>() == wanted,
            strategy + ": a gradient is held by " + std::to_string(counts[static_cast<int64_t>(i)].item<double>()) +
                (pieces ? " elements over the ranks" : " ranks") + " after backward, expected " +
                std::to_string(wanted));
    }
    if (pieces) {
      // By element, not by tensor: every rank holds its share (at most a
      // few elements of padding over 1/N), the weights cut between ranks.
      check(local_count <= elements / world + 8 * world,
            "fsdp: this rank holds " + std::to_string(local_count) + " of " + std::to_string(elements) +
                " gradient elements after backward, more than its share");
    }
    if (stage2 && world > 1 && !pieces) {
      check(local_count < static_cast<int64_t>(holders.size()),
            "zero2: this rank kept every gradient after backward");
    }
    if (step == 2) {
      // Clipping by total norm sees every rank's share (a large max_norm,
      // so nothing changes).
      const auto norm = fabric.clip_gradients(model, optimizer, c10::nullopt, 1e6);
      double squares = 0;
      for (const auto& item : reference_parameters) squares += item.value().grad().pow(2).sum().item<double>();
      check(std::abs(norm.item<double>() - std::sqrt(squares)) < 1e-4 * std::sqrt(squares),
            "clip_gradients: total norm " + std::to_string(norm.item<double>()) + ", expected " +
                std::to_string(std::sqrt(squares)));
    }
    fabric.step(optimizer);
    reference_step(step);
    if (fsdp && world > 1) {
      // Between steps no parameter's own memory is held (each rank keeps
      // its shard apart; nothing has read the model since the step).
      int64_t held = 0;
      int64_t whole = 0;
      for (const auto& item : parameters) {
        whole += item.value().numel();
        if (item.value().storage().nbytes() > 0) held += item.value().numel();
      }
      check(held == 0, "fsdp: this rank holds " + std::to_string(held) + " of " + std::to_string(whole) +
                           " parameter values between steps");
    }
  }
  const double difference = max_relative_difference(*model, *reference);
  check(difference < 1e-5, strategy + " differs from the whole-batch run after " +
                               std::to_string(steps) + " Adam steps by " + std::to_string(difference));
  check(identical_across_ranks(fabric, *model), strategy + ": the ranks' parameters differ");

  // Optimizer state: ~1/N per rank, the whole of it across ranks.
  const auto [bytes, states] = adam_state(optimizer);
  const auto [full_bytes, full_states] = adam_state(reference_optimizer);
  const auto total_bytes = fabric.all_reduce(torch::tensor(bytes), fabric::ReduceOp::Sum).item<int64_t>();
  const auto total_states = fabric.all_reduce(torch::tensor(states), fabric::ReduceOp::Sum).item<int64_t>();
  fabric.print(strategy, "rank 0 holds", bytes, "of", full_bytes, "optimizer state bytes");
  // fsdp: a parameter cut between ranks has a state on each.
  check(total_bytes == full_bytes && (fsdp ? total_states >= full_states : total_states == full_states),
        "the ranks' optimizer states do not add up to the whole (" + std::to_string(total_bytes) +
            " of " + std::to_string(full_bytes) + " bytes)");
  if (world > 1) {
    check(static_cast<double>(bytes) <= 0.6 * static_cast<double>(full_bytes),
          "this rank holds " + std::to_string(bytes) + " of " + std::to_string(full_bytes) +
              " optimizer state bytes");
  }

  if (scaled) {
    // An inf on the last rank only (it owns other parameters than rank 0
    // under zero2): every rank skips the step and halves the scale.
    const double scale = fabric.loss_scale();
    const auto before = module_state(*model);
    optimizer.zero_grad();
    auto loss = local_loss(steps);
    if (rank == world - 1) loss = loss * std::numeric_limits<float>::infinity();
    fabric.backward(loss);
    fabric.step(optimizer);
    const auto after = module_state(*model);
    for (size_t i = 0; i < before.size(); ++i) check(torch::equal(before[i], after[i]), "a rank stepped on inf gradients");
    check(fabric.loss_scale() == scale / 2, "the loss scale did not halve on every rank");
  }

  // Checkpoint: the file holds the whole optimizer state (the format ddp
  // writes); loading keeps each rank's shard; training resumes exactly.
  int64_t step = steps;
  const std::string path =
      fabric.broadcast(fresh_checkpoint_path(arguments.dir.empty() ? std::string("/tmp") : arguments.dir, "zero"));
  fabric.save(path, fabric::State{{"model", model}, {"optimizer", optimizer}, {"step", step}});
  check(adam_state(optimizer).first == bytes, "save left other ranks' state in this rank's optimizer");
  if (fsdp && arguments.fsdp_state_dict_type == "full") {
    struct stat status {};
    check(::stat(path.c_str(), &status) == 0 && S_ISREG(status.st_mode),
          "fsdp, state dict type 'full': no checkpoint file at " + path);
  } else if (fsdp && world > 1) {
    // Sharded (the default): a directory in which each rank wrote about its
    // share of the parameters and optimizer state, never the whole.
    std::ifstream latest(path + "/latest");
    int64_t generation = 0, parts = 0;
    latest >> generation >> parts;
    check(parts == world, "fsdp: the sharded checkpoint has " + std::to_string(parts) + " parts");
    // The model's values in this rank's part: each parameter in exactly one
    // part, none holding them all.
    torch::serialize::InputArchive part, saved_model;
    part.load_from(path + "/gen-" + std::to_string(generation) + "/shard-" + std::to_string(rank) + "-of-" +
                   std::to_string(world) + ".pt");
    part.read("entry0", saved_model);
    int64_t values_in_part = 0, values = 0;
    std::function<void(torch::nn::Module&, torch::serialize::InputArchive*)> count =
        [&](torch::nn::Module& module, torch::serialize::InputArchive* saved_module) {
          for (const auto& item : module.named_parameters(/*recurse=*/false)) {
            values += item.value().numel();
            torch::Tensor saved;
            if (saved_module != nullptr && saved_module->try_read(item.key(), saved)) values_in_part += saved.numel();
          }
          for (const auto& child : module.named_children()) {
            torch::serialize::InputArchive saved_child;
            const bool has_child = saved_module != nullptr && saved_module->try_read(child.key(), saved_child);
            count(*child.value(), has_child ? &saved_child : nullptr);
          }
        };
    count(*model, &saved_model);
    const auto in_all_parts = fabric.all_reduce(torch::tensor(values_in_part), fabric::ReduceOp::Sum).item<int64_t>();
    fabric.print("fsdp: rank 0's part holds", values_in_part, "of", values, "parameter values");
    check(values_in_part > 0 && values_in_part < values && in_all_parts == values,
          "fsdp: this rank's part holds " + std::to_string(values_in_part) + " of " + std::to_string(values) +
              " parameter values (all parts: " + std::to_string(in_all_parts) + ")");
  }
  {
    SquareNet plain;  // never set up: loads everything the file holds
    torch::optim::Adam plain_optimizer(plain->parameters(), 0.01);
    int64_t plain_step = 0;
    fabric.load(path, {{"model", plain}, {"optimizer", plain_optimizer}, {"step", plain_step}});
    check(adam_state(plain_optimizer) == adam_state(reference_optimizer),
          "the checkpoint does not hold the whole optimizer state");
    check(plain_step == steps, "step did not round-trip");
  }
  // The same for a checkpoint of the optimizer alone.
  const std::string optimizer_path = path + ".optimizer";
  fabric.save(optimizer_path, optimizer);
  check(adam_state(optimizer).first == bytes, "save left other ranks' state in this rank's optimizer");
  {
    SquareNet plain;
    torch::optim::Adam plain_optimizer(plain->parameters(), 0.01);
    fabric.load(optimizer_path, plain_optimizer);
    check(adam_state(plain_optimizer) == adam_state(reference_optimizer),
          "the optimizer checkpoint does not hold the whole optimizer state");
    // Loaded into the set-up optimizer, only this rank's shard stays.
    fabric.load(optimizer_path, optimizer);
    check(adam_state(optimizer).first == bytes, "loading the optimizer kept other ranks' state");
  }
  fabric.barrier("optimizer checkpoint read");
  if (fabric.is_global_zero()) std::remove(optimizer_path.c_str());

  torch::manual_seed(23 + rank);
  SquareNet resumed;
  torch::optim::Adam resumed_optimizer(resumed->parameters(), 0.01);
  fabric.setup(resumed, resumed_optimizer);
  int64_t resumed_step = 0;
  fabric.load(path, {{"model", resumed}, {"optimizer", resumed_optimizer}, {"step", resumed_step}});
  // The second model is split too (its owners may differ from the first's;
  // fsdp: a parameter cut between ranks has a state on each).
  const auto [resumed_bytes, resumed_states] = adam_state(resumed_optimizer);
  const auto resumed_total_states =
      fabric.all_reduce(torch::tensor(resumed_states), fabric::ReduceOp::Sum).item<int64_t>();
  check(fabric.all_reduce(torch::tensor(resumed_bytes), fabric::ReduceOp::Sum).item<int64_t>() ==
                full_bytes &&
            (fsdp ? resumed_total_states >= full_states : resumed_total_states == full_states),
        "after load the ranks do not hold one shard each of the optimizer state");
  if (world > 1) {
    check(static_cast<double>(resumed_bytes) <= 0.6 * static_cast<double>(full_bytes) || world > 2,
          "after load this rank holds more than its shard of the optimizer state");
  }
  for (int extra = 0; extra < 2; ++extra) {
    for (auto* pair : {&model, &resumed}) {
      auto& optimizer_of = pair == &model ? optimizer : resumed_optimizer;
      optimizer_of.zero_grad();
      const auto [inputs, targets] = batch(100 + extra);
      fabric.backward(torch::mse_loss((*pair)->forward(inputs.narrow(0, rank * per_rank, per_rank)),
                                      targets.narrow(0, rank * per_rank, per_rank)));
      fabric.step(optimizer_of);
    }
  }
  // Bit for bit with 2 ranks; with more, a sum of 3+ gradients may be
  // ordered differently (other owners, other buckets).
  if (world <= 2) {
    check_same_state(*model, *resumed, "training after load differs from uninterrupted training");
  } else {
    check(max_relative_difference(*model, *resumed) < 1e-5,
          "training after load differs from uninterrupted training");
  }

  // LBFGS cannot be sharded; said at setup.
  torch::optim::LBFGS lbfgs(model->parameters());
  check_error(error_of([&] { fabric.setup_optimizer(lbfgs); }), "LBFGS", "LBFGS under a sharded strategy");

  // Gradient accumulation: under fsdp the passes inside no_backward_sync
  // accumulate whole gradients, which the last pass reduce-scatters into
  // pieces.
  if (world > 1) {
    check_accumulation(fabric);
    // (zero1's Reducer refuses a synchronizing pass that leaves parameters
    // without gradients unless find_unused_parameters is on, as ddp's.)
    if (stage2) check_accumulation_unreached(fabric);
  }

  // optimizer.step() instead of fabric.step(optimizer): caught by the next
  // backward on every rank, before any collective (fsdp: scenario
  // fsdp_direct_step).
  if (fsdp) {
    fabric.barrier("zero checks done");
    if (fabric.is_global_zero()) remove_checkpoint(path);
    fabric.print(strategy, "checks passed on", world, "ranks");
    return 0;
  }
  optimizer.zero_grad();
  fabric.backward(local_loss(0));
  optimizer.step();
  check_error(error_of([&] { fabric.backward(local_loss(1)); }),
              "call fabric.step(optimizer) instead of optimizer.step()",
              "optimizer.step() called directly");
  // The ranks now hold different models; the sync check at the Fabric's end
  // would say so (rightly). Loading the checkpoint makes them one again.
  fabric.load(path, {{"model", model}}, /*strict=*/false);
  fabric.barrier("zero checks done");
  if (fabric.is_global_zero()) remove_checkpoint(path);
  fabric.print(strategy, "checks passed on", world, "ranks");
  return 0;
}

// fsdp, optimizer.step() instead of fabric.step(optimizer): each gradient
// is this rank's flat piece of it, which the optimizer cannot apply to the
// whole parameter. The step throws (LibTorch's size check), or, where the
// sizes happen to broadcast, changes the parameters, and the next Fabric
// call refuses with the reason. Never silent.
int run_fsdp_direct_step(const Arguments& arguments) {
  fabric::Fabric fabric(
      fabric::Options().accelerator("cpu").devices(arguments.devices).strategy("fsdp").fsdp_min_num_params(1000));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(5);
  SquareNet model;
  const auto loss = [&] { return model->forward(torch::randn({4, 32})).pow(2).mean(); };
  for (const bool momentum : {false, true}) {
    // Adam (state made in the step) and plain SGD (the parameter updated
    // in place by the gradient).
    std::unique_ptr<torch::optim::Optimizer> optimizer;
    if (momentum) {
      optimizer = std::make_unique<torch::optim::Adam>(model->parameters(), 0.01);
    } else {
      optimizer = std::make_unique<torch::optim::SGD>(model->parameters(), 0.01);
    }
    fabric.setup(model, *optimizer);
    fabric.backward(loss());
    std::string refused = error_of([&] { optimizer->step(); });
    const bool by_libtorch = !refused.empty();
    if (!by_libtorch) {
      refused = error_of([&] { fabric.backward(loss()); });
      check_error(refused, "call fabric.step(optimizer) instead of optimizer.step()", "optimizer.step() called directly");
    }
    fabric.print("optimizer.step() called directly was refused", by_libtorch ? "by the optimizer:" : "by Fabric:",
                 refused.substr(0, refused.find('\n')));
    if (!by_libtorch) break;  // the model changed: no second round on it
  }
  return 0;
}

// fsdp, a forward that branches on the rank: rank 0 runs the first layer,
// the others the last one, so the ranks bring back different units; the
// first fill finds that out and ends the job with the reason (expected to
// fail, with that message).
int run_fsdp_divergent_forward(const Arguments& arguments) {
  fabric::Fabric fabric(
      fabric::Options().accelerator("cpu").devices(arguments.devices).strategy("fsdp").fsdp_min_num_params(1000));
  fabric.launch();
  this_rank = fabric.global_rank();
  SquareNet model;
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  auto& layer = fabric.global_rank() == 0 ? model->layers.front() : model->layers.back();
  fabric.backward(layer(torch::randn({4, 32})).pow(2).mean());
  fabric.print("a forward that branches on the rank was not caught");
  return 0;
}

// After backward each gradient is on its owner only (the others dropped).
bool gradients_on_owners(const std::string& strategy) { return strategy == "zero2" || strategy == "fsdp"; }

// A model whose second head takes part only on some steps (a branch, not a
// frozen part: `frozen` has requires_grad false and is used every step).
struct TwoHeadNetImpl : torch::nn::Module {
  TwoHeadNetImpl()
      : frozen(register_module("frozen", torch::nn::Linear(8, 8))),
        body(register_module("body", torch::nn::Linear(8, 16))),
        head1(register_module("head1", torch::nn::Linear(16, 4))),
        head2(register_module("head2", torch::nn::Linear(16, 4))) {
    for (auto& parameter : frozen->parameters()) parameter.requires_grad_(false);
  }
  torch::Tensor forward(const torch::Tensor& x, bool use_head2) {
    const auto hidden = torch::tanh(body(frozen(x)));
    auto output = head1(hidden);
    if (use_head2) output = output + head2(hidden);
    return output;
  }
  torch::nn::Linear frozen, body, head1, head2;
};
TORCH_MODULE(TwoHeadNet);

// Every trained parameter's gradient, by name (undefined ones as zeros).
std::map<std::string, torch::Tensor> gradients_of(torch::nn::Module& module) {
  std::map<std::string, torch::Tensor> gradients;
  for (const auto& item : module.named_parameters()) {
    if (!item.value().requires_grad()) continue;
    const auto& gradient = item.value().grad();
    gradients[item.key()] =
        gradient.defined() ? gradient.detach().clone() : torch::zeros_like(item.value());
  }
  return gradients;
}

// Compares the set-up model's gradients after a synchronized backward with
// the average over the ranks of what a plain copy computed locally (what
// DDP's result must be).
void check_averaged_gradients(fabric::Fabric& fabric, torch::nn::Module& model,
                              torch::nn::Module& local_copy, const std::string& what) {
  const auto actual = gradients_of(model);
  for (const auto& [name, local] : gradients_of(local_copy)) {
    const auto expected = fabric.all_reduce(local, fabric::ReduceOp::Mean);
    const auto found = actual.find(name);
    check(found != actual.end(), what + ": no gradient for " + name);
    const double error = (found->second - expected).abs().max().item<double>();
    check(error <= 1e-5 * (1 + expected.abs().max().item<double>()),
          what + ": the gradient of " + name + " differs from the ranks' average by " +
              std::to_string(error));
  }
}

// Parameters used on some steps only (issue 26): without
// find_unused_parameters, the first backward that leaves a trained
// parameter unused throws on every rank before anything is reduced, naming
// the parameters and the fix; with it (Options, or the strategy name
// "ddp_find_unused_parameters_true"), the ranks stay in sync through such
// steps, also with gradient accumulation and with a parameter used on one
// rank only. "zero2" needs no option. Run with FABRIC_CHECK_SYNC=1 (ctest),
// every fabric.step() is checked too. --uncaught: the error leaves main, as
// in a program that does not expect it (--unused-rank=R: only rank R leaves
// head2 unused).
int run_unused_checks(const Arguments& arguments) {
  auto options = fabric::Options().accelerator("cpu").devices(arguments.devices).strategy(
      arguments.strategy);
  if (arguments.find_unused) options.find_unused_parameters(true);
  fabric::Fabric fabric(options);
  fabric.launch();
  this_rank = fabric.global_rank();
  const int rank = this_rank;
  const std::string strategy = fabric.options().strategy();
  const bool find_unused = fabric.options().find_unused_parameters();
  // The Reducer (ddp, zero1) needs every parameter's gradient; zero2 reduces
  // what there is after backward.
  const bool expect_error = !find_unused && !gradients_on_owners(strategy);
  torch::manual_seed(71);
  TwoHeadNet model;
  torch::optim::SGD optimizer(model->parameters(), 0.05);
  fabric.setup(model, optimizer);
  auto batch = [&](int step) {
    torch::manual_seed(710 + 10 * step + rank);  // different data on every rank
    return torch::randn({6, 8});
  };
  auto train_step = [&](int step, bool use_head2) {
    optimizer.zero_grad();
    fabric.backward(model->forward(batch(step), use_head2).pow(2).mean());
    fabric.step(optimizer);
  };

  // Issue 38 point 3: a head the first backward reaches on no rank (a
  // segmentation model on a classification backbone whose fc the forward
  // never uses), find_unused_parameters unchosen: the job trains, in sync,
  // the head untouched. --how=first_rank1: rank 1 uses the head in its first
  // backward, rank 0 does not (they disagree: both stop).
  if (arguments.how == "first" || arguments.how == "first_rank1") {
    const auto head2_before = model->head2->weight.detach().clone();
    for (int step = 0; step < 4; ++step) {
      const bool use_head2 = arguments.how == "first_rank1" && rank == 1 && step == 0;
      train_step(step, use_head2);
      check(identical_across_ranks(fabric, *model), "ranks differ after step " + std::to_string(step));
    }
    check(torch::equal(head2_before, model->head2->weight.detach()), "head2 changed though no rank used it");
    fabric.print("unused at the first backward (" + strategy + "): trained in sync");
    return 0;
  }

  if (arguments.uncaught) {
    train_step(0, true);
    const bool skip = arguments.unused_rank < 0 || arguments.unused_rank == rank;
    std::fprintf(stderr, "test: rank %d %s head2 at step 1\n", rank, skip ? "skips" : "uses");
    train_step(1, !skip);
    train_step(2, true);
    fabric.print("unused scenario (uncaught) done");
    return 0;
  }

  // Both heads: nothing unused.
  train_step(0, true);
  // Gradient accumulation: a micro-batch without head2 under
  // no_backward_sync, then one with it, is no unused parameter.
  optimizer.zero_grad();
  {
    auto no_sync = fabric.no_backward_sync(model);
    fabric.backward(model->forward(batch(1), false).pow(2).mean());
  }
  fabric.backward(model->forward(batch(2), true).pow(2).mean());
  fabric.step(optimizer);
  check(identical_across_ranks(fabric, *model), "ranks differ after accumulating gradients");

  if (expect_error) {
    const auto before = module_state(*model);
    optimizer.zero_grad();
    const std::string error =
        error_of([&] { fabric.backward(model->forward(batch(3), false).pow(2).mean()); });
    const std::string what = "head2 unused under '" + strategy + "' without find_unused_parameters";
    check_error(error, "head2.weight, head2.bias", what);
    check_error(error, "2 trained parameters of a set-up model get no gradient", what);
    check_error(error, "on rank " + std::to_string(rank), what);
    check_error(error, "find_unused_parameters(true)", what);
    if (strategy == "ddp") check_error(error, "\"ddp_find_unused_parameters_true\"", what);
    check(error.find("body.") == std::string::npos && error.find("head1.") == std::string::npos &&
              error.find("frozen.") == std::string::npos,
          what + ": the message names parameters that were used or frozen: " + error);
    // Thrown before backward ran: no gradient, nothing reduced, and the job
    // goes on in sync when the next step uses every parameter.
    for (const auto& parameter : model->parameters()) {
      check(!parameter.grad().defined() || parameter.grad().abs().sum().item<double>() == 0,
            what + ": a gradient was computed before the error");
    }
    const auto after = module_state(*model);
    for (size_t i = 0; i < before.size(); ++i) {
      check(torch::equal(before[i], after[i]), what + ": the model changed");
    }
    train_step(4, true);
    check(identical_across_ranks(fabric, *model), what + ": ranks differ after the error");

    // A parameter frozen after setup leaves the synchronization (it used
    // to be reported as unused): no error, and it stays as it was.
    model->head1->bias.requires_grad_(false);
    const auto frozen_bias = model->head1->bias.detach().clone();
    model->head1->bias.mutable_grad() = torch::Tensor();
    train_step(5, true);
    check(torch::equal(frozen_bias, model->head1->bias.detach()),
          "head1.bias changed while frozen after setup");
    model->head1->bias.requires_grad_(true);
    train_step(6, true);
    check(identical_across_ranks(fabric, *model), "ranks differ after the frozen case");
    fabric.print("unused parameter without find_unused_parameters (" + strategy +
                 "): error names head2.weight, head2.bias");
    return 0;
  }

  // In sync through steps that leave head2 out (on every rank).
  for (int step = 3; step < 9; ++step) {
    const bool use_head2 = step % 2 == 0;
    const auto head2_before = model->head2->weight.detach().clone();
    const auto head1_before = model->head1->weight.detach().clone();
    train_step(step, use_head2);
    check(!torch::equal(head1_before, model->head1->weight.detach()), "head1 was not trained");
    check(torch::equal(head2_before, model->head2->weight.detach()) == !use_head2,
          use_head2 ? "head2 was not trained on a step that used it"
                    : "head2 changed on a step that did not use it");
    check(identical_across_ranks(fabric, *model),
          "ranks differ after step " + std::to_string(step) + " (" + strategy + ")");
  }

  // A plain copy of the model (not set up) gives each rank's local
  // gradients; the set-up model's must be their average over the ranks
  // (ddp, zero1: every rank holds them; zero2: checked through the step),
  // and the SGD step must apply that average.
  TwoHeadNet local_copy;
  auto start_from_model = [&] {
    torch::NoGradGuard no_grad;
    const auto from = module_state(*model);
    const auto to = module_state(*local_copy);
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
    for (auto& parameter : model->parameters()) parameter.mutable_grad() = torch::Tensor();
    for (auto& parameter : local_copy->parameters()) parameter.mutable_grad() = torch::Tensor();
  };
  auto check_step_applied_average = [&](const std::string& what) {
    if (!gradients_on_owners(strategy)) check_averaged_gradients(fabric, *model, *local_copy, what);
    const auto expected_gradients = gradients_of(*local_copy);
    std::map<std::string, torch::Tensor> before;
    for (const auto& item : model->named_parameters()) before[item.key()] = item.value().detach().clone();
    fabric.step(optimizer);
    for (const auto& item : model->named_parameters()) {
      if (!item.value().requires_grad()) continue;
      const auto average = fabric.all_reduce(expected_gradients.at(item.key()), fabric::ReduceOp::Mean);
      const auto expected = before[item.key()] - 0.05 * average;
      const double error = (item.value().detach() - expected).abs().max().item<double>();
      check(error <= 1e-6, what + ": the step did not apply the ranks' average gradient to " +
                               item.key() + " (off by " + std::to_string(error) + ")");
    }
    check(identical_across_ranks(fabric, *model), what + ": ranks differ after the step");
  };

  // head2 used on rank 1 only: its gradient is rank 1's divided by the
  // world size on every rank.
  start_from_model();
  fabric.backward(model->forward(batch(9), rank == 1).pow(2).mean());
  local_copy->forward(batch(9), rank == 1).pow(2).mean().backward();
  check_step_applied_average("head2 used on rank 1 only (" + strategy + ")");

  // Accumulation: head2 used in the micro-batch under no_backward_sync
  // only; the synchronized backward must still average its gradient.
  start_from_model();
  {
    auto no_sync = fabric.no_backward_sync(model);
    fabric.backward(model->forward(batch(10), true).pow(2).mean());
  }
  fabric.backward(model->forward(batch(11), false).pow(2).mean());
  local_copy->forward(batch(10), true).pow(2).mean().backward();
  local_copy->forward(batch(11), false).pow(2).mean().backward();
  check_step_applied_average("head2 used under no_backward_sync only (" + strategy + ")");

  // The same with head2 used under no_backward_sync on rank 0 only.
  start_from_model();
  {
    auto no_sync = fabric.no_backward_sync(model);
    fabric.backward(model->forward(batch(12), rank == 0).pow(2).mean());
  }
  fabric.backward(model->forward(batch(13), false).pow(2).mean());
  local_copy->forward(batch(12), rank == 0).pow(2).mean().backward();
  local_copy->forward(batch(13), false).pow(2).mean().backward();
  check_step_applied_average("head2 used under no_backward_sync on rank 0 only (" + strategy + ")");

  train_step(14, false);
  check(identical_across_ranks(fabric, *model), "ranks differ at the end (" + strategy + ")");
  fabric.print("parameters unused on some steps (" + strategy +
               (find_unused ? ", find_unused_parameters" : "") + "): trained in sync");
  return 0;
}

// A LoRA-style model: a base of two linear layers and a low-rank adapter
// beside the first.
struct LoraNetImpl : torch::nn::Module {
  LoraNetImpl()
      : base1(register_module("base1", torch::nn::Linear(8, 16))),
        base2(register_module("base2", torch::nn::Linear(16, 4))) {
    adapter_down = register_parameter("adapter_down", torch::randn({2, 8}) * 0.3);
    adapter_up = register_parameter("adapter_up", torch::randn({16, 2}) * 0.3);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    namespace F = torch::nn::functional;
    const auto adapted = F::linear(F::linear(x, adapter_down), adapter_up);
    return base2(torch::tanh(base1(x) + adapted));
  }
  std::vector<torch::Tensor> base_parameters() {
    auto parameters = base1->parameters();
    for (const auto& parameter : base2->parameters()) parameters.push_back(parameter);
    return parameters;
  }
  torch::nn::Linear base1, base2;
  torch::Tensor adapter_down, adapter_up;
};
TORCH_MODULE(LoraNet);

// Training phases that change which parameters are trained (LoRA): phase 1
// trains the adapter only (the base frozen before setup, optimizer A over
// the adapter), phase 2 unfreezes the base and trains everything with
// optimizer B (fabric.setup_optimizer), phase 3 freezes the base again after
// setup and goes back to optimizer A. In every step each trained
// parameter's gradient is the ranks' average of what a plain copy computes
// locally (ddp, zero1: every rank holds it; zero2: the step applied it),
// the SGD step applies exactly that, frozen parameters get no gradient,
// and the ranks hold identical models (FABRIC_CHECK_SYNC=1 from ctest
// checks every fabric.step as well). Then ranks that change the set
// differently at the same backward get a clear error on every rank, and
// training goes on once they agree again, also after fabric.setup(model,
// optimizer B) instead of setup_optimizer. --disagree=one: rank 1 alone
// unfreezes a parameter (the job must end with a message).
int run_phase_checks(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options()
                            .accelerator("cpu")
                            .devices(arguments.devices)
                            .strategy(arguments.strategy)
                            .bucket_cap_mb(arguments.bucket_cap_mb));
  fabric.launch();
  this_rank = fabric.global_rank();
  const int rank = this_rank;
  const std::string strategy = fabric.options().strategy();
  constexpr double kLearningRate = 0.05;
  torch::manual_seed(90 + rank);  // setup() must make the ranks' models equal
  LoraNet model;
  LoraNet local_copy;  // not set up: each rank's local gradients
  auto set_base_trained = [&](bool trained) {
    for (auto& parameter : model->base_parameters()) parameter.requires_grad_(trained);
  };
  set_base_trained(false);
  torch::optim::SGD optimizer_a({model->adapter_down, model->adapter_up}, kLearningRate);
  fabric.setup(model, optimizer_a);
  check(identical_across_ranks(fabric, *model), "ranks differ after setup");

  int step = 0;
  // One training step with `optimizer`, checked against the local copy.
  auto train_step = [&](torch::optim::Optimizer& optimizer, const std::string& phase) {
    const std::string what = phase + ", step " + std::to_string(step) + " (" + strategy + ")";
    {
      torch::NoGradGuard no_grad;
      const auto from = model->parameters();
      const auto to = local_copy->parameters();
      for (size_t i = 0; i < from.size(); ++i) {
        to[i].copy_(from[i]);
        to[i].requires_grad_(from[i].requires_grad());
      }
    }
    optimizer.zero_grad();
    for (auto& parameter : model->parameters()) parameter.mutable_grad() = torch::Tensor();
    for (auto& parameter : local_copy->parameters()) parameter.mutable_grad() = torch::Tensor();
    torch::manual_seed(900 + 10 * step + rank);  // different data on every rank
    const auto input = torch::randn({6, 8});
    fabric.backward(model->forward(input).pow(2).mean());
    local_copy->forward(input).pow(2).mean().backward();
    for (const auto& item : model->named_parameters()) {
      if (!item.value().requires_grad()) {
        check(!item.value().grad().defined(), what + ": frozen " + item.key() + " has a gradient");
      }
    }
    if (!gradients_on_owners(strategy)) check_averaged_gradients(fabric, *model, *local_copy, what);
    const auto local_gradients = gradients_of(*local_copy);
    std::map<std::string, torch::Tensor> before;
    for (const auto& item : model->named_parameters()) before[item.key()] = item.value().detach().clone();
    std::set<const void*> stepped;
    for (const auto& group : optimizer.param_groups()) {
      for (const auto& parameter : group.params()) stepped.insert(parameter.unsafeGetTensorImpl());
    }
    fabric.step(optimizer);
    for (const auto& item : model->named_parameters()) {
      torch::Tensor expected = before[item.key()];
      const auto local = local_gradients.find(item.key());
      if (stepped.count(item.value().unsafeGetTensorImpl()) > 0 && local != local_gradients.end()) {
        expected = expected - kLearningRate * fabric.all_reduce(local->second, fabric::ReduceOp::Mean);
      }
      const double error = (item.value().detach() - expected).abs().max().item<double>();
      check(error <= 1e-6, what + ": " + item.key() + " is off by " + std::to_string(error) +
                               " from the step with the ranks' average gradient");
    }
    check(identical_across_ranks(fabric, *model), what + ": ranks differ after the step");
    ++step;
  };

  for (int i = 0; i < 3; ++i) train_step(optimizer_a, "phase 1 (adapter only)");
  set_base_trained(true);
  torch::optim::SGD optimizer_b(model->parameters(), kLearningRate);
  fabric.setup_optimizer(optimizer_b);
  for (int i = 0; i < 3; ++i) train_step(optimizer_b, "phase 2 (everything)");
  set_base_trained(false);
  for (int i = 0; i < 2; ++i) train_step(optimizer_a, "phase 3 (base frozen after setup)");

  if (arguments.disagree == "one") {
    // Only rank 1 unfreezes base2's bias: the others are in another
    // collective. Not caught: the job must end, naming the cause.
    if (rank == 1) model->base2->bias.requires_grad_(true);
    std::fprintf(stderr, "test: rank %d %s base2.bias\n", rank,
                 rank == 1 ? "unfreezes" : "leaves frozen");
    // Two routes, both ending the job: rank 1 waits in the agreement while
    // rank 0 reduces gradients (the job monitor ends the job), or, at a
    // backward where the sampled sync check is due, both meet in the
    // agreement and throw (caught here as a program's main would).
    try {
      for (int i = 0; i < 2; ++i) train_step(optimizer_b, "after a change on rank 1 only");
    } catch (const std::runtime_error& error) {
      std::fprintf(stderr, "test: rank %d stops: %s\n", rank, error.what());
      return 1;
    }
    fabric.print("phases: the job went on although rank 1 alone changed the set");
    return 0;
  }

  // Every rank changes the set at the same backward, but not alike.
  (rank % 2 == 0 ? model->base1->bias : model->base2->bias).requires_grad_(true);
  for (auto& parameter : model->parameters()) parameter.mutable_grad() = torch::Tensor();
  const std::string error = error_of([&] {
    fabric.backward(model->forward(torch::randn({6, 8})).pow(2).mean());
  });
  check_error(error, "the ranks disagree on which parameters of the set-up models require grad",
              "ranks that unfreeze different parameters");
  check_error(error, "rank 0 trains 3 parameter tensors (64 values)", "ranks that unfreeze different parameters");
  check_error(error, "rank 1 trains 3 parameter tensors (52 values)", "ranks that unfreeze different parameters");
  check_error(error, "at the same step on every rank", "ranks that unfreeze different parameters");
  for (const auto& parameter : model->parameters()) {
    check(!parameter.grad().defined(), "a gradient was computed before the disagreement was reported");
  }
  // Agreeing again (both biases trained on every rank) trains in sync.
  model->base1->bias.requires_grad_(true);
  model->base2->bias.requires_grad_(true);
  for (int i = 0; i < 2; ++i) train_step(optimizer_b, "phase 4 (base biases unfrozen)");
  // The model set up again with the second optimizer (instead of
  // setup_optimizer), after another change: the same.
  set_base_trained(true);
  fabric.setup(model, optimizer_b);
  for (int i = 0; i < 2; ++i) train_step(optimizer_b, "phase 5 (set up again)");
  fabric.print("training phases (" + strategy + "): gradients are the ranks' average in every phase");
  return 0;
}

// ---- optimizers over parameters that no set-up model owns ----------------------

// A research program's model, which fabricize cannot set up: a class that is
// not a module owns modules it made with new and gathers their parameters.
struct Encoder : torch::nn::Module {
  Encoder() : fc(register_module("fc", torch::nn::Linear(8, 16))) {}
  torch::Tensor forward(const torch::Tensor& x) { return torch::tanh(fc(x)); }
  torch::nn::Linear fc;
};
struct Head : torch::nn::Module {
  Head() : fc(register_module("fc", torch::nn::Linear(16, 4))) {
    gain = register_parameter("gain", torch::randn({4}));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc(x) * gain; }
  torch::nn::Linear fc;
  torch::Tensor gain;
};
class Experiment {
 public:
  Experiment() : encoder_(new Encoder()), head_(new Head()) {}
  ~Experiment() {
    delete encoder_;
    delete head_;
  }
  Experiment(const Experiment&) = delete;
  Experiment& operator=(const Experiment&) = delete;
  torch::Tensor forward(const torch::Tensor& x) { return head_->forward(encoder_->forward(x)); }
  std::vector<torch::Tensor> parameters() {
    std::vector<torch::Tensor> parameters = encoder_->parameters();
    for (const auto& parameter : head_->parameters()) parameters.push_back(parameter);
    return parameters;
  }
  void to(torch::Dtype dtype) {
    encoder_->to(dtype);
    head_->to(dtype);
  }
  Encoder& encoder() { return *encoder_; }

 private:
  Encoder* encoder_ = nullptr;
  Head* head_ = nullptr;
};

// The generic trainer: the optimizer is made in train(), where fabricize
// puts fabric.setup_optimizer(optimizer). `hooks` lets the test look at
// every stage (on_setup, batch, after_backward, after_step).
template <class Model>
class Trainer {
 public:
  Trainer(fabric::Fabric& fabric, Model* model, bool set_up)
      : fabric_(fabric), model_(model), set_up_(set_up) {}
  template <class Hooks>
  void train(int steps, Hooks& hooks) {
    torch::optim::Adam optimizer(model_->parameters(), torch::optim::AdamOptions(0.01));
    if (set_up_) fabric_.setup_optimizer(optimizer);
    hooks.on_setup(optimizer);
    for (int i = 0; i < steps; ++i) {
      const torch::Tensor input = hooks.batch();
      optimizer.zero_grad();
      const torch::Tensor loss = model_->forward(input).pow(2).mean();
      fabric_.backward(loss);
      hooks.after_backward();
      fabric_.step(optimizer);
      hooks.after_step();
    }
  }

 private:
  fabric::Fabric& fabric_;
  Model* model_;
  bool set_up_;
};

bool identical_across_ranks(fabric::Fabric& fabric, const std::vector<torch::Tensor>& tensors) {
  bool identical = true;
  for (const auto& tensor : tensors) {
    const auto largest = fabric.all_reduce(tensor.detach(), fabric::ReduceOp::Max);
    const auto smallest = fabric.all_reduce(tensor.detach(), fabric::ReduceOp::Min);
    identical = identical && torch::equal(largest, smallest);
  }
  return identical;
}

// Checks a model trained through Fabric against a plain copy of it, stepped
// by its own optimizer on the ranks' average of the copy's local gradients
// (what every rank must compute). `reference_forward`: the copy's forward.
struct AveragedStepCheck {
  fabric::Fabric& fabric;
  std::string what;
  std::vector<torch::Tensor> trained;    // the Fabric's parameters (the optimizer's)
  std::vector<torch::Tensor> reference;  // the plain copy's, in the same order
  std::function<torch::Tensor(const torch::Tensor&)> reference_forward;
  torch::Dtype dtype = torch::kFloat;
  bool check_gradients = true;  // not under zero2 (owners only hold them)
  double tolerance = 0;         // 0: bit for bit
  bool sharded = false;         // zero1/zero2 on several ranks: ~1/N of the Adam state
  bool stage2 = false;          // zero2 on several ranks: ~1/N of the gradients
  bool pieces = false;          // fsdp on several ranks: gradients and state by element
  torch::optim::Optimizer* optimizer = nullptr;  // the Trainer's, while it trains
  std::unique_ptr<torch::optim::Adam> reference_optimizer;
  std::vector<torch::Tensor> averaged;
  int step = 0;

  std::string where() const { return what + ", step " + std::to_string(step); }
  void compare(const std::vector<torch::Tensor>& actual, const std::vector<torch::Tensor>& expected,
               const std::string& kind) {
    for (size_t i = 0; i < actual.size(); ++i) {
      check(actual[i].defined(), where() + ": no " + kind + " for parameter " + std::to_string(i));
      const double error = (actual[i] - expected[i]).abs().max().item<double>();
      check(error <= tolerance * (1 + expected[i].abs().max().item<double>()),
            where() + ": the " + kind + " of parameter " + std::to_string(i) + " is off by " +
                std::to_string(error) + " from the single process on the averaged gradient");
    }
  }
  std::vector<torch::Tensor> values(const std::vector<torch::Tensor>& tensors) const {
    std::vector<torch::Tensor> result;
    for (const auto& tensor : tensors) result.push_back(tensor.detach().clone());
    return result;
  }
  // Each trained tensor (fsdp: element) is held by exactly one rank, and no
  // rank holds all.
  void check_sharded(int64_t held, const std::string& kind) {
    int64_t total = 0;
    for (const auto& parameter : trained) total += pieces ? parameter.numel() : 1;
    const int64_t over_ranks = fabric.all_reduce(held, fabric::ReduceOp::Sum);
    check(over_ranks == total && held < total,
          where() + ": this rank holds the " + kind + " of " + std::to_string(held) + " of " +
              std::to_string(total) + " parameters, " + std::to_string(over_ranks) +
              " over all ranks (sharded: each one on exactly one rank)");
  }
  void on_setup(torch::optim::Optimizer& trainer_optimizer) {
    optimizer = &trainer_optimizer;
    if (!reference_optimizer) {
      check(identical_across_ranks(fabric, trained), what + ": ranks differ after setup_optimizer");
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < trained.size(); ++i) reference[i].copy_(trained[i]);
    } else {
      // Set up again (a new optimizer over the same parameters): nothing moves.
      compare(values(trained), values(reference), "value after the second setup_optimizer");
    }
    reference_optimizer = std::make_unique<torch::optim::Adam>(reference, torch::optim::AdamOptions(0.01));
  }
  torch::Tensor batch() {
    torch::manual_seed(1300 + 10 * step + fabric.global_rank());  // every rank its own data
    const torch::Tensor input = torch::randn({6, 8}).to(dtype);
    // The copy's local gradients, averaged over the ranks.
    reference_optimizer->zero_grad();
    reference_forward(input).pow(2).mean().backward();
    averaged.clear();
    for (const auto& parameter : reference) {
      averaged.push_back(fabric.all_reduce(parameter.grad(), fabric::ReduceOp::Mean));
    }
    return input;
  }
  void after_backward() {
    std::vector<torch::Tensor> gradients;
    for (const auto& parameter : trained) gradients.push_back(parameter.grad());
    if (stage2) {
      int64_t held = 0;
      for (const auto& gradient : gradients) held += gradient.defined() ? (pieces ? gradient.numel() : 1) : 0;
      check_sharded(held, "gradient");
    }
    if (pieces) {
      // Each rank's pieces against the same part of the averaged gradient.
      const auto offsets = piece_offsets(fabric, gradients);
      std::vector<torch::Tensor> held;
      std::vector<torch::Tensor> expected;
      for (size_t i = 0; i < gradients.size(); ++i) {
        if (!gradients[i].defined()) continue;
        held.push_back(gradients[i]);
        expected.push_back(piece_of(averaged[i], gradients[i], offsets[i]));
      }
      compare(held, expected, "gradient piece");
    }
    if (!check_gradients) return;
    compare(gradients, averaged, "gradient");
  }
  void after_step() {
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < reference.size(); ++i) reference[i].mutable_grad().copy_(averaged[i]);
    }
    reference_optimizer->step();
    compare(values(trained), values(reference), "value");
    check(identical_across_ranks(fabric, trained), where() + ": ranks differ after the step");
    if (sharded) {
      int64_t held = 0;
      for (const auto& entry : optimizer->state()) {
        const auto* adam = dynamic_cast<const torch::optim::AdamParamState*>(entry.second.get());
        held += pieces && adam != nullptr ? adam->exp_avg().numel() : 1;
      }
      check_sharded(held, "Adam state");
    }
    ++step;
  }
};

int run_loose_checks(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options()
                            .accelerator("cpu")
                            .devices(arguments.devices)
                            .strategy(arguments.strategy)
                            .precision(arguments.precision)
                            .bucket_cap_mb(arguments.bucket_cap_mb));
  fabric.launch();
  this_rank = fabric.global_rank();
  const int rank = this_rank;
  const std::string strategy = fabric.options().strategy();
  const std::string& precision = fabric.options().precision();
  const torch::Dtype dtype = precision == "64-true" ? torch::kDouble : torch::kFloat;
  const bool one_process = fabric.world_size() == 1;
  const std::string label = strategy + ", " + precision + ", " +
                            std::to_string(fabric.world_size()) + " process" +
                            (one_process ? "" : "es");

  torch::manual_seed(40 + rank);  // every rank builds different values
  Experiment experiment;
  Trainer<Experiment> trainer(fabric, &experiment, arguments.setup);
  if (!arguments.setup) {
    // Never set up: nothing is synchronized, and Fabric says so (the driver
    // reads the warnings).
    struct NoChecks {
      void on_setup(torch::optim::Optimizer&) {}
      torch::Tensor batch() { return torch::randn({6, 8}); }
      void after_backward() {}
      void after_step() {}
    } hooks;
    trainer.train(3, hooks);
    fabric.barrier("loose parameters not set up");
    return 0;
  }
  if (!one_process) {
    check(!identical_across_ranks(fabric, experiment.parameters()),
          "differently seeded ranks built identical models (the check would prove nothing)");
  }
  Experiment plain;  // each rank's plain copy
  if (dtype != torch::kFloat) plain.to(dtype);
  AveragedStepCheck hooks{fabric, "Experiment trained by setup_optimizer alone (" + label + ")",
                          experiment.parameters(), plain.parameters(),
                          [&](const torch::Tensor& input) { return plain.forward(input); }};
  hooks.dtype = dtype;
  hooks.check_gradients = !gradients_on_owners(strategy) || one_process;
  // Averages of 2 ranks are exact ((a + b) / 2 = a / 2 + b / 2 in floating
  // point), so every step is too.
  hooks.tolerance = fabric.world_size() <= 2 ? 0 : 1e-6;
  hooks.sharded = (strategy == "zero1" || gradients_on_owners(strategy)) && !one_process;
  hooks.stage2 = gradients_on_owners(strategy) && !one_process;
  hooks.pieces = strategy == "fsdp" && !one_process;
  trainer.train(3, hooks);
  for (const auto& parameter : experiment.parameters()) {
    check(parameter.scalar_type() == dtype,
          "precision " + precision + " was not applied to an optimizer parameter of no set-up "
          "model: it is " + std::string(c10::toString(parameter.scalar_type())));
  }
  // train() again: a new optimizer over the same parameters, set up again.
  trainer.train(2, hooks);

  // The encoder set up as a model now (as Lightning allows: one optimizer
  // over two models, the second set up later): its parameters leave the
  // optimizer's set and are synchronized with it, the head's stay.
  // (fsdp keeps the units it made at setup, and refuses this: its message
  // is checked in runtime.fsdp_training_phases_refused_2proc.)
  if (strategy != "fsdp") {
    fabric.setup_module(experiment.encoder());
    trainer.train(2, hooks);
  }

  // One set-up model, and an optimizer over it plus a loose extra tensor.
  torch::manual_seed(50 + rank);
  Net model;
  auto scale = torch::randn({4}, torch::requires_grad());
  std::vector<torch::Tensor> trained = model->parameters();
  trained.push_back(scale);
  torch::optim::Adam optimizer(trained, torch::optim::AdamOptions(0.01));
  fabric.setup(model, optimizer);
  if (!one_process) {
    check(identical_across_ranks(fabric, {scale}), "the extra tensor differs across ranks after setup");
    check(identical_across_ranks(fabric, *model), "the model differs across ranks after setup");
  }
  Net plain_model;
  auto plain_scale = torch::zeros({4}, torch::requires_grad());
  std::vector<torch::Tensor> reference = plain_model->parameters();
  reference.push_back(plain_scale);
  {
    torch::NoGradGuard no_grad;
    plain_model->offset.copy_(model->offset);  // the buffer (broadcast with the model)
    if (dtype != torch::kFloat) {
      plain_model->to(dtype);
      plain_scale.set_data(plain_scale.to(dtype));
    }
  }
  AveragedStepCheck mixed{fabric, "a set-up model plus a loose tensor (" + label + ")", trained,
                          reference, [&](const torch::Tensor& input) {
                            return plain_model->forward(input) * plain_scale;
                          }};
  mixed.dtype = dtype;
  mixed.check_gradients = hooks.check_gradients;
  mixed.tolerance = hooks.tolerance;
  mixed.sharded = hooks.sharded;
  mixed.stage2 = hooks.stage2;
  mixed.pieces = hooks.pieces;
  mixed.step = 100;
  mixed.on_setup(optimizer);
  for (int i = 0; i < 3; ++i) {
    const auto input = mixed.batch();
    optimizer.zero_grad();
    fabric.backward((model->forward(input) * scale).pow(2).mean());
    mixed.after_backward();
    fabric.step(optimizer);
    mixed.after_step();
  }
  check(scale.scalar_type() == dtype, "precision " + precision + " was not applied to the loose tensor");
  fabric.print("loose parameters (" + label + "): in sync, each step the averaged-gradient step");
  return 0;
}

// Output printed before fabric.launch() (an options banner) appears once,
// from rank 0; after launch() every rank prints as usual. --fail-rank=R:
// rank R (from the launcher's RANK) fails before launch(), on stderr.
int run_banner(const Arguments& arguments) {
  const char* rank_variable = std::getenv("RANK");
  const int rank_before_launch = rank_variable != nullptr && *rank_variable != '\0' ? std::atoi(rank_variable) : 0;
  std::cout << "BANNER: options devices=" << arguments.devices << std::endl;
  std::printf("PRINTF-BANNER (buffered)\n");  // flushed at launch(), or at exit
  std::fprintf(stderr, "STDERR-BEFORE-LAUNCH from rank %d\n", rank_before_launch);
  if (rank_before_launch == arguments.fail_rank) {
    std::fprintf(stderr, "rank %d: cannot start: bad option --fail-rank\n", rank_before_launch);
    return 3;
  }
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  fabric.print("AFTER-LAUNCH: rank 0 through fabric.print");
  if (fabric.global_rank() == 1) std::cout << "AFTER-LAUNCH: rank 1 through std::cout" << std::endl;
  if (fabric.global_rank() > 0) std::printf("AFTER-LAUNCH: printf of rank %d\n", fabric.global_rank());
  fabric.barrier("printed");
  return 0;
}

// A logger class of the program's own: its std::ofstream member is opened in
// its constructor, with no Fabric at hand.
class OwnCsvLogger {
 public:
  explicit OwnCsvLogger(const std::string& path) : out_(fabric::rank_zero_ofstream(path)) {
    out_ << "step,loss,rank\n";
  }
  void row(int step, double loss, int rank) { out_ << step << ',' << loss << ',' << rank << '\n'; }
  void close() { out_.close(); }

 private:
  std::ofstream out_;
};

// fabric::rank_zero_ofstream: a logger constructed before launch() and one
// after it; each file holds one header and one row per step, rank 0's.
int run_rank_zero_file(const Arguments& arguments) {
  check(!arguments.dir.empty(), "rank_zero_file needs --dir");
  std::error_code ignored;
  std::filesystem::create_directories(arguments.dir, ignored);
  const std::string before_path = arguments.dir + "/before_launch.csv";
  const std::string after_path = arguments.dir + "/after_launch.csv";
  OwnCsvLogger before(before_path);
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  const int rank = this_rank;
  OwnCsvLogger after(after_path);
  constexpr int kSteps = 5;
  for (int step = 0; step < kSteps; ++step) {
    before.row(step, 1.5 + step + 100 * rank, rank);
    after.row(step, 2.5 + step + 100 * rank, rank);
  }
  before.close();
  after.close();
  fabric.barrier("logged");
  if (rank == 0) {
    for (const auto& [path, offset] : {std::make_pair(before_path, 1.5), std::make_pair(after_path, 2.5)}) {
      std::ifstream in(path);
      check(static_cast<bool>(in), "cannot read " + path);
      std::vector<std::string> lines;
      for (std::string line; std::getline(in, line);) lines.push_back(line);
      check(lines.size() == 1 + kSteps, path + ": " + std::to_string(lines.size()) +
                                            " lines, expected one header and " +
                                            std::to_string(kSteps) + " rows");
      check(lines[0] == "step,loss,rank", path + ": header '" + lines[0] + "'");
      for (int step = 0; step < kSteps; ++step) {
        std::ostringstream expected;
        expected << step << ',' << offset + step << ",0";
        check(lines[static_cast<size_t>(step) + 1] == expected.str(),
              path + ": row '" + lines[static_cast<size_t>(step) + 1] + "', expected '" +
                  expected.str() + "'");
      }
    }
    std::filesystem::remove(before_path, ignored);
    std::filesystem::remove(after_path, ignored);
  }
  fabric.print("rank-zero files: one header and " + std::to_string(kSteps) + " rows of rank 0 on " +
               std::to_string(fabric.world_size()) + " ranks");
  return 0;
}

// Every rank's vector, in rank order (gathered through the Fabric).
template <class Index>
std::vector<std::vector<int64_t>> gather_vectors(fabric::Fabric& fabric,
                                                 const std::vector<Index>& local) {
  return gather_indices(fabric, std::vector<int64_t>(local.begin(), local.end()));
}

// Rank r's share must be the positions r, r + world, ... of `order`
// (wrapping around past its end when padded).
void check_strided(const std::vector<std::vector<int64_t>>& shards,
                   const std::vector<int64_t>& order, const std::string& what) {
  const size_t world = shards.size();
  for (size_t r = 0; r < world; ++r) {
    for (size_t k = 0; k < shards[r].size(); ++k) {
      check(shards[r][k] == order[(r + k * world) % order.size()],
            what + ": rank " + std::to_string(r) + "'s element " + std::to_string(k) +
                " is not position " + std::to_string(r + k * world) + " of the shared order");
    }
  }
}

// Exactly once each of 0..size-1 over all shards (pad = false).
void check_exact_cover(const std::vector<std::vector<int64_t>>& shards, size_t size,
                       const std::string& what) {
  std::vector<int64_t> all;
  for (size_t r = 0; r < shards.size(); ++r) {
    const size_t expected = size / shards.size() + (r < size % shards.size() ? 1 : 0);
    check(shards[r].size() == expected, what + ": rank " + std::to_string(r) + " got " +
                                            std::to_string(shards[r].size()) + " indices, not " +
                                            std::to_string(expected));
    all.insert(all.end(), shards[r].begin(), shards[r].end());
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> wanted(size);
  for (size_t i = 0; i < size; ++i) wanted[i] = static_cast<int64_t>(i);
  check(all == wanted, what + ": the shards are not a partition of 0.." + std::to_string(size - 1));
}

// Padded: ceil(size / world) on every rank, every index at least once, and
// the extra ones are the first positions of the order again.
void check_padded_cover(const std::vector<std::vector<int64_t>>& shards,
                        const std::vector<int64_t>& order, const std::string& what) {
  const size_t world = shards.size();
  const size_t per_rank = (order.size() + world - 1) / world;
  std::set<int64_t> seen;
  for (size_t r = 0; r < world; ++r) {
    check(shards[r].size() == per_rank, what + ": rank " + std::to_string(r) + " got " +
                                            std::to_string(shards[r].size()) + " indices, not " +
                                            std::to_string(per_rank));
    seen.insert(shards[r].begin(), shards[r].end());
  }
  check(seen.size() == order.size(), what + ": not every index is in some shard");
  check_strided(shards, order, what);
}

// DistributedIndexSampler through fabric.index_sampler() and fabric.shard()
// on real ranks (issue 26): a data set of 1001 samples, which no world size
// of 2 or 3 divides.
int run_index_sampler_checks(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  const size_t world = static_cast<size_t>(fabric.world_size());
  const size_t size = 1001;
  check(size % world != 0, "the data set size divides the world size (the check would prove less)");

  const auto sampler = fabric.index_sampler(size);
  check(sampler.num_replicas() == world && sampler.rank() == static_cast<size_t>(this_rank),
        "index_sampler does not use the world size and the global rank");
  const auto order0 = sampler.permutation(0);
  const auto orders = gather_vectors(fabric, order0);
  for (const auto& order : orders) {
    check(order == orders[0], "ranks drew different permutations for epoch 0");
  }
  const auto padded0 = gather_vectors(fabric, sampler.indices(0));
  check_padded_cover(padded0, orders[0], "index_sampler epoch 0, padded");
  check(sampler.num_samples() == padded0[static_cast<size_t>(this_rank)].size(),
        "num_samples() is not the number of indices");
  const auto padded1 = gather_vectors(fabric, sampler.indices(1));
  check(padded1 != padded0, "epoch 1 has the same order as epoch 0");
  check_padded_cover(padded1, gather_vectors(fabric, sampler.permutation(1))[0],
                     "index_sampler epoch 1, padded");
  check(gather_vectors(fabric, sampler.indices(0)) == padded0, "epoch 0 drawn twice differs");

  const auto evaluation = fabric.index_sampler(size, fabric::IndexSamplerOptions().pad(false));
  for (size_t epoch : {0, 1}) {
    const auto shards = gather_vectors(fabric, evaluation.indices(epoch));
    check_exact_cover(shards, size, "index_sampler epoch " + std::to_string(epoch) + ", pad=false");
    check_strided(shards, gather_vectors(fabric, evaluation.permutation(epoch))[0],
                  "index_sampler, pad=false");
  }
  const auto in_order = fabric.index_sampler(size, fabric::IndexSamplerOptions().shuffle(false).pad(false));
  const auto sequential = in_order.indices(3);
  for (size_t k = 0; k < sequential.size(); ++k) {
    check(sequential[k] == static_cast<size_t>(this_rank) + k * world,
          "shuffle(false): not the positions rank, rank + world, ...");
  }

  // The program's own shuffle, seeded differently on every rank (as with
  // std::random_device): shard() gives a disjoint cover of rank 0's order.
  std::vector<size_t> own(size);
  std::iota(own.begin(), own.end(), size_t{0});
  std::mt19937 generator(4242 + static_cast<unsigned>(this_rank));
  std::shuffle(own.begin(), own.end(), generator);
  const auto own_orders = gather_vectors(fabric, own);
  for (size_t r = 1; r < world; ++r) {
    check(own_orders[r] != own_orders[0], "the ranks' own shuffles agree (the check would prove nothing)");
  }
  const auto exact = gather_vectors(fabric, fabric.shard(own, /*pad=*/false));
  check_exact_cover(exact, size, "shard(pad=false) of differently shuffled vectors");
  check_strided(exact, own_orders[0], "shard(pad=false) takes rank 0's order");
  const auto padded = gather_vectors(fabric, fabric.shard(own));
  check_padded_cover(padded, own_orders[0], "shard() of differently shuffled vectors");

  // Other index types come back as they went in.
  std::vector<int> small(own.begin(), own.end());
  const std::vector<int> small_shard = fabric.shard(std::move(small), false);
  check_exact_cover(gather_vectors(fabric, small_shard), size, "shard of std::vector<int>");
  std::vector<int64_t> wide(own.begin(), own.end());
  check(gather_vectors(fabric, fabric.shard(wide, false)) == exact, "shard of std::vector<int64_t>");

  // A rank with another number of indices: the same error on every rank.
  std::vector<size_t> uneven(this_rank == 1 ? size - 1 : size, 0);
  const std::string error = error_of([&] { fabric.shard(uneven); });
  check_error(error, "rank 0 has 1001 indices and rank 1 has 1000", "shard of vectors of different lengths");
  check(fabric.shard(std::vector<size_t>{}).empty(), "shard of an empty vector is not empty");

  fabric.print("index sampler checks passed on", world, "ranks");
  return 0;
}

// Rank 1 does not join a collective: rank 0 must fail after the configured
// timeout with a message that says so (the driver measures the time).
int run_hang(const Arguments& arguments) try {
  {
    fabric::Fabric fabric(fabric::Options()
                              .accelerator("cpu")
                              .devices(arguments.devices)
                              .timeout(std::chrono::milliseconds(arguments.timeout_ms)));
    fabric.launch();
    this_rank = fabric.global_rank();
    fabric.barrier("joined");
    if (fabric.global_rank() == 1) {
      std::fprintf(stderr, "test: rank 1 sleeps\n");
      std::this_thread::sleep_for(std::chrono::seconds(60));
    }
    fabric.all_reduce(torch::ones({4}));
  }
  return 0;
} catch (const std::runtime_error& error) {
  std::fprintf(stderr, "test: rank %d caught: %s\n", this_rank, error.what());
  return 5;
}

// Loads twice.ckpt in one process and prints its step.
int run_load_step(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(1));
  fabric.launch();
  Net model;
  int64_t step = 0;
  fabric.load(arguments.dir + "/twice.ckpt", {{"model", model}, {"step", step}});
  fabric.printf("loaded step %lld\n", static_cast<long long>(step));
  return 0;
}


// ---- models held by value ----------------------------------------------------

// The shape of PyTorch's C++ MNIST example: a Module subclass, no TORCH_MODULE.
struct PlainNet : torch::nn::Module {
  PlainNet()
      : first(register_module("first", torch::nn::Linear(8, 16))),
        second(register_module("second", torch::nn::Linear(16, 4))) {}
  torch::Tensor forward(const torch::Tensor& x) { return second(torch::tanh(first(x))); }
  torch::nn::Linear first;
  torch::nn::Linear second;
};

// Trains a by-value model made here; returns whether the ranks stayed in
// sync. Called twice, the second model usually lives at the first one's
// address (same stack frame), after the first was destroyed.
bool train_local_model(fabric::Fabric& fabric, int seed, const void** address) {
  torch::manual_seed(seed + fabric.global_rank());  // different weights per rank
  PlainNet model;
  *address = &model;
  std::unique_ptr<torch::optim::Optimizer> optimizer =
      std::make_unique<torch::optim::SGD>(model.parameters(), 0.05);
  fabric.setup(model, *optimizer);
  const auto initial = model.first->weight.detach().clone();
  for (int step = 0; step < 4; ++step) {
    torch::manual_seed(900 + 10 * step + fabric.global_rank());  // different data per rank
    optimizer->zero_grad();
    fabric.backward(model.forward(torch::randn({6, 8})).pow(2).mean());
    fabric.step(*optimizer);
  }
  check(!torch::equal(initial, model.first->weight.detach()), "a by-value model did not train");
  return identical_across_ranks(fabric, model);
}

int run_by_value_checks(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();

  const void* first_address = nullptr;
  const void* second_address = nullptr;
  check(train_local_model(fabric, 10, &first_address), "a by-value model drifted apart across ranks");
  check(train_local_model(fabric, 20, &second_address),
        "a second by-value model (set up after the first was destroyed) drifted apart");
  std::fprintf(stderr, "test: rank %d: second model %s the first one's address\n", this_rank,
               first_address == second_address ? "at" : "not at");

  // Setup without an optimizer, then an optimizer set up on its own.
  torch::manual_seed(30 + this_rank);
  PlainNet model;
  fabric.setup(model);
  check(identical_across_ranks(fabric, model), "setup(model) did not broadcast rank 0's weights");
  torch::optim::Adam adam(model.parameters(), 0.01);
  fabric.setup_optimizer(adam);

  // A GAN: two by-value models, each with its own optimizer, backward and step.
  torch::manual_seed(40 + this_rank);
  PlainNet generator;
  PlainNet discriminator;
  auto generator_optimizer = std::make_shared<torch::optim::Adam>(generator.parameters(), 0.01);
  torch::optim::SGD discriminator_optimizer(discriminator.parameters(), 0.05);
  fabric.setup(generator, *generator_optimizer);
  fabric.setup(discriminator, discriminator_optimizer);
  for (int step = 0; step < 3; ++step) {
    torch::manual_seed(400 + 10 * step + this_rank);
    const auto noise = torch::randn({5, 8});
    const auto real = torch::randn({5, 4});
    discriminator_optimizer.zero_grad();
    const auto fake = generator.forward(noise).detach();
    const auto discriminator_loss =
        (discriminator.forward(torch::cat({real, real}, 1)) - discriminator.forward(torch::cat({fake, fake}, 1)))
            .pow(2)
            .mean();
    fabric.backward(discriminator_loss);
    fabric.step(discriminator_optimizer);
    generator_optimizer->zero_grad();
    fabric.backward(generator.forward(noise).pow(2).mean());
    fabric.step(*generator_optimizer);
  }
  check(identical_across_ranks(fabric, generator) && identical_across_ranks(fabric, discriminator),
        "the by-value GAN's models drifted apart");

  // Gradient accumulation and clipping on a by-value model.
  torch::optim::SGD sgd(model.parameters(), 0.1);
  for (int micro = 0; micro < 2; ++micro) {
    torch::manual_seed(600 + 10 * micro + this_rank);
    auto guard = fabric.no_backward_sync(model, /*enabled=*/micro == 0);
    fabric.backward(model.forward(torch::randn({4, 8})).pow(2).sum());
  }
  const auto norm = fabric.clip_gradients(model, sgd, c10::nullopt, 0.5);
  check(torch::equal(fabric.all_reduce(norm, fabric::ReduceOp::Max),
                     fabric.all_reduce(norm, fabric::ReduceOp::Min)),
        "clip_gradients on a by-value model: norms differ across ranks");
  fabric.step(sgd);
  check(identical_across_ranks(fabric, model), "by-value model after no_backward_sync/clip");

  // Checkpoints of a by-value model, and of a State that holds one.
  const std::string path =
      fabric.broadcast(fresh_checkpoint_path("/tmp", "by_value"));
  fabric.save(path, model);
  torch::manual_seed(77 + this_rank);
  PlainNet loaded;
  fabric.load(path, loaded);
  check_same_state(model, loaded, "a by-value model loaded from a by-value save differs");
  int64_t step = 5;
  fabric.save(path, fabric::State{{"model", generator}, {"step", step}});
  int64_t loaded_step = 0;
  fabric.load(path, fabric::State{{"model", loaded}, {"step", loaded_step}});
  check(loaded_step == 5, "State with a by-value model: step");
  check_same_state(generator, loaded, "State with a by-value model: tensors");
  fabric.barrier("by-value checkpoints read");
  if (fabric.is_global_zero()) remove_checkpoint(path);
  fabric.print("by-value checks passed on", fabric.world_size(), "ranks");
  return 0;
}

// ---- scalar all_reduce ---------------------------------------------------------

template <class T>
void expect_scalar(T actual, T expected, const std::string& what) {
  check(actual == expected, "all_reduce(" + what + ") gave " + std::to_string(actual) +
                                ", expected " + std::to_string(expected));
}

int run_scalar_checks(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  const int rank = this_rank;
  const int world = fabric.world_size();
  using fabric::ReduceOp;

  // Each rank holds rank + 1 (scaled): sums, means, extremes are known.
  const double sum = world * (world + 1) / 2.0;
  double total_loss = 0.25 * (rank + 1);
  total_loss = fabric.all_reduce(total_loss, ReduceOp::Sum);
  static_assert(std::is_same<decltype(fabric.all_reduce(total_loss, ReduceOp::Sum)), double>::value,
                "double in, double out");
  expect_scalar(total_loss, 0.25 * sum, "double, Sum");
  expect_scalar(fabric.all_reduce(0.5 * (rank + 1)), 0.5 * sum / world, "double, default Mean");
  float accuracy = 0.125f * static_cast<float>(rank + 1);
  static_assert(std::is_same<decltype(fabric.all_reduce(accuracy, ReduceOp::Sum)), float>::value,
                "float in, float out");
  expect_scalar(fabric.all_reduce(accuracy, ReduceOp::Max), 0.125f * static_cast<float>(world),
                "float, Max");
  expect_scalar(fabric.all_reduce(accuracy, ReduceOp::Mean), static_cast<float>(0.125 * sum / world),
                "float, Mean");

  int correct = 10 * (rank + 1);
  correct = fabric.all_reduce(correct, ReduceOp::Sum);
  static_assert(std::is_same<decltype(fabric.all_reduce(correct, ReduceOp::Sum)), int>::value,
                "int in, int out");
  expect_scalar(correct, static_cast<int>(10 * sum), "int, Sum");
  expect_scalar(fabric.all_reduce(-rank, ReduceOp::Min), -(world - 1), "int, Min");
  // Beyond double's exact integers: reduced as int64_t, exact.
  const int64_t big = (int64_t{1} << 53) + 1;
  expect_scalar(fabric.all_reduce(big + rank, ReduceOp::Sum),
                static_cast<int64_t>(world) * big + static_cast<int64_t>(sum) - world, "int64_t, Sum");
  expect_scalar(fabric.all_reduce(big + rank, ReduceOp::Max), big + world - 1, "int64_t, Max");
  long samples = 1000L * (rank + 1);
  expect_scalar(fabric.all_reduce(samples, ReduceOp::Sum), static_cast<long>(1000 * sum), "long, Sum");
  size_t seen = static_cast<size_t>(64 * (rank + 1));
  static_assert(std::is_same<decltype(fabric.all_reduce(seen, ReduceOp::Sum)), size_t>::value,
                "size_t in, size_t out");
  expect_scalar(fabric.all_reduce(seen, ReduceOp::Sum), static_cast<size_t>(64 * sum), "size_t, Sum");
  unsigned batches = 3u + static_cast<unsigned>(rank);
  expect_scalar(fabric.all_reduce(batches, ReduceOp::Min), 3u, "unsigned, Min");
  expect_scalar(fabric.all_reduce(rank == world - 1, ReduceOp::Max), true, "bool, Max (any)");
  expect_scalar(fabric.all_reduce(rank == world - 1, ReduceOp::Min), false, "bool, Min (all)");

  // Integer Mean is refused on every rank, and the group still works.
  check_error(error_of([&] { fabric.all_reduce(correct, ReduceOp::Mean); }), "ReduceOp::Mean of an integer",
              "Mean of an int");
  // int32 overflow of the sum: every rank throws std::overflow_error.
  bool overflowed = false;
  try {
    fabric.all_reduce(std::numeric_limits<int>::max() - rank, ReduceOp::Sum);
  } catch (const std::overflow_error&) {
    overflowed = true;
  }
  check(overflowed, "an int Sum beyond INT_MAX did not throw std::overflow_error");
  fabric.barrier("scalars done");
  fabric.print("scalar checks passed on", world, "ranks");
  return 0;
}

// ---- load or start fresh -------------------------------------------------------

// The shape users write around torch::load, kept after migration. Returns
// whether the load worked; fails the check when the error is not a
// c10::Error, or its message lacks `expected`.
template <class Load>
bool load_or_fresh(Load&& load, const std::string& expected, const std::string& what) {
  try {
    load();
    return true;
  } catch (const c10::Error& error) {
    const std::string message = error.what();
    check(message.find(expected) != std::string::npos,
          what + ": the message '" + message + "' lacks '" + expected + "'");
    check(message.find("Exception raised from") == std::string::npos && message.find('\n') == std::string::npos,
          what + ": what() carries a backtrace: " + message);
    check(std::string(error.what_without_backtrace()) == message, what + ": what_without_backtrace differs");
    return false;
  } catch (const std::exception& error) {
    fail(what + ": fabric.load threw something that is not a c10::Error: " + error.what());
  }
}

int run_load_fresh(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  check(!arguments.dir.empty(), "--dir is needed");
  const std::string& dir = arguments.dir;
  torch::manual_seed(3 + this_rank);
  Net model;
  PlainNet plain;
  auto pointer = std::make_shared<PlainNet>();
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  fabric.setup(plain);
  fabric.setup(pointer);
  torch::Tensor tensor;
  int64_t step = 0;
  fabric::State state{{"model", model}, {"optimizer", optimizer}, {"step", step}};

  // Nothing there yet: every overload throws a c10::Error on every rank.
  const std::string missing = dir + "/missing.pt";
  check(!load_or_fresh([&] { fabric.load(missing, model); }, "No such file", "holder, missing"), "loaded");
  check(!load_or_fresh([&] { fabric.load(missing, plain); }, "No such file", "by value, missing"), "loaded");
  check(!load_or_fresh([&] { fabric.load(missing, pointer); }, "No such file", "shared_ptr, missing"), "loaded");
  check(!load_or_fresh([&] { fabric.load(missing, optimizer); }, "No such file", "optimizer, missing"), "loaded");
  check(!load_or_fresh([&] { fabric.load(missing, tensor); }, "No such file", "tensor, missing"), "loaded");
  check(!load_or_fresh([&] { fabric.load(missing, state); }, "No such file", "State, missing"), "loaded");
  check(!load_or_fresh([&] { fabric.load(dir, state); }, "is a directory", "State, directory"), "loaded");

  // Garbage and wrong contents.
  const std::string garbage = dir + "/garbage.pt";
  const std::string tensor_file = dir + "/tensor.pt";
  fabric.save(tensor_file, torch::ones({3}));
  if (fabric.is_global_zero()) std::ofstream(garbage, std::ios::binary) << std::string(1000, 'x');
  fabric.barrier("garbage written");
  check(!load_or_fresh([&] { fabric.load(garbage, model); }, "truncated or corrupted", "holder, garbage"), "loaded");
  check(!load_or_fresh([&] { fabric.load(garbage, optimizer); }, "truncated or corrupted", "optimizer, garbage"), "loaded");
  check(!load_or_fresh([&] { fabric.load(tensor_file, plain); }, "the checkpoint has no", "by value, a tensor file"), "loaded");
  check(!load_or_fresh([&] { fabric.load(tensor_file, state); }, "not a fabric::State", "State, a tensor file"), "loaded");
  check(load_or_fresh([&] { fabric.load(tensor_file, tensor); }, "", "tensor file") && torch::equal(tensor, torch::ones({3})),
        "a tensor checkpoint did not load");

  // A checkpoint that only some ranks can read (a path on a disk of one
  // node): every rank throws, none deadlocks, nothing is modified.
  const std::string per_rank = dir + "/rank" + std::to_string(this_rank) + ".pt";
  fabric.save(dir + "/rank1.pt", model);  // rank 0 writes it; rank 0's own file never exists
  const auto before = model->first->weight.detach().clone();
  if (fabric.world_size() == 2) {
    check(!load_or_fresh([&] { fabric.load(per_rank, model); }, "on rank 0 only",
                         "missing on rank 0 only"),
          "loaded");
    step = 7;
    fabric.save(dir + "/state.pt", state);
    const std::string corrupted_on_one = dir + "/state_rank" + std::to_string(this_rank) + ".pt";
    if (fabric.is_global_zero()) {
      std::ifstream in(dir + "/state.pt", std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      for (int r = 0; r < fabric.world_size(); ++r) {
        std::ofstream out(dir + "/state_rank" + std::to_string(r) + ".pt", std::ios::binary);
        out << (r == 1 ? bytes.substr(0, bytes.size() / 2) : bytes);
      }
    }
    fabric.barrier("per-rank states written");
    step = 0;
    check(!load_or_fresh([&] { fabric.load(corrupted_on_one, state); }, "on rank 1 only",
                         "State corrupted on rank 1 only"),
          "loaded");
    check(step == 0, "a load that failed on another rank modified this rank's state");
  }
  check(torch::equal(before, model->first->weight.detach()), "a failed load modified the model");

  // Rank 0 writes a file on its own, late (fabricize's form of a save under
  // a condition only some ranks meet), and every rank then loads it: the
  // load waits for every rank, so none reads the older version.
  const std::string alone = dir + "/alone.pt";
  fabric.save(alone, torch::zeros({4}));
  if (fabric.is_global_zero()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    torch::save(torch::full({4}, 7.0), alone);
  }
  torch::Tensor read_back;
  check(load_or_fresh([&] { fabric.load(alone, read_back); }, "", "rank 0's own write"), "rank 0's file did not load");
  check(torch::equal(read_back, torch::full({4}, 7.0)),
        "a rank read the file before rank 0 had written it: fabric.load did not wait for every rank");

  // Start fresh, train, and the ranks are still one job.
  train_steps(fabric, model, optimizer, 0, 3, false);
  check(identical_across_ranks(fabric, *model), "ranks drifted apart after failed loads");
  fabric.save(dir + "/good.pt", state);
  check(load_or_fresh([&] { fabric.load(dir + "/good.pt", state); }, "", "good State"), "the good State did not load");
  fabric.print("load-or-start-fresh checks passed on", fabric.world_size(), "ranks");
  return 0;
}

// ---- ranks that leave training at different steps ------------------------------

int run_diverge(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(5);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  const std::string checkpoint = arguments.dir + "/diverge.pt";
  check(arguments.collective != "save" || !arguments.dir.empty(), "--collective=save needs --dir");
  for (int step = 0; step < arguments.steps; ++step) {
    torch::manual_seed(50 + 10 * step + this_rank);
    optimizer.zero_grad();
    const auto loss = model->forward(torch::randn({16, 8})).pow(2).mean();
    fabric.backward(loss);
    fabric.step(optimizer);
    // `if (loss < threshold) break;` on an un-reduced loss, in effect.
    if (this_rank == arguments.stop_rank && step == arguments.stop_step) {
      std::fprintf(stderr, "test: rank %d leaves the loop after step %d\n", this_rank, step);
      break;
    }
    if (arguments.collective == "barrier") fabric.barrier("end of step");
    if (arguments.collective == "all_reduce") fabric.all_reduce(loss.detach());
    if (arguments.collective == "save") fabric.save(checkpoint, model);
  }
  std::fprintf(stderr, "test: rank %d left the loop\n", this_rank);
  return 0;
}

// Rank R takes another path than the others at step K, and the ranks end up
// in different collectives while all of them still run:
//   scalar_after_loop: R leaves the loop and all-reduces its loss total (a
//     double) while the others are in the next backward (the migrated
//     early-stop program);
//   barrier: R enters fabric.barrier("rank-local checkpoint") while the
//     others are in the next backward;
//   broadcast: every step all-reduces 5 metrics; R broadcasts 3 values
//     instead;
//   skip_backward: R `continue`s past its backward (a per-rank NaN check),
//     and after the loop every rank all-reduces its loss total.
int run_paths(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(5);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  const std::string& path = arguments.path;
  check(path == "scalar_after_loop" || path == "barrier" || path == "broadcast" ||
            path == "skip_backward",
        "unknown --path '" + path + "'");
  double total = 0;
  for (int step = 0; step < arguments.steps; ++step) {
    torch::manual_seed(50 + 10 * step + this_rank);
    optimizer.zero_grad();
    const auto loss = model->forward(torch::randn({16, 8})).pow(2).mean();
    const bool differs = this_rank == arguments.stop_rank && step == arguments.stop_step;
    if (differs) std::fprintf(stderr, "test: rank %d takes path '%s' at step %d\n", this_rank, path.c_str(), step);
    if (differs && path == "skip_backward") continue;  // `if (isnan(my_loss)) continue;`
    if (differs && path == "barrier") fabric.barrier("rank-local checkpoint");
    fabric.backward(loss);
    fabric.step(optimizer);
    total += loss.item<double>();
    if (differs && path == "scalar_after_loop") break;  // `if (my_loss < x) break;`
    if (path == "broadcast") {
      if (differs) {
        fabric.broadcast(torch::ones({3}));
      } else {
        fabric.all_reduce(torch::ones({5}));
      }
    }
  }
  total = fabric.all_reduce(total, fabric::ReduceOp::Sum);
  std::fprintf(stderr, "test: rank %d left the loop (total %g)\n", this_rank, total);
  return 0;
}

int run_late_work(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(6);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  train_steps(fabric, model, optimizer, 0, 5, false);
  if (fabric.global_rank() == arguments.local_work_rank) {
    // Evaluation on one rank alone: no collective while the others have finished.
    std::fprintf(stderr, "test: rank %d works alone for %.1f s\n", this_rank, arguments.local_work_s);
    std::this_thread::sleep_for(std::chrono::duration<double>(arguments.local_work_s));
    std::printf("late work done\n");
  }
  return 0;
}

// ---- training that is not synchronized -----------------------------------------

int run_unsynchronized(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(8);
  Net model;
  // Parameter groups with a learning rate each: the shape that got no setup.
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(model->first->parameters(),
                      std::make_unique<torch::optim::SGDOptions>(0.01));
  groups.emplace_back(model->second->parameters(),
                      std::make_unique<torch::optim::SGDOptions>(0.1));
  torch::optim::SGD optimizer(std::move(groups), torch::optim::SGDOptions(0.01));
  if (arguments.setup) fabric.setup(model, optimizer);
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    fabric.backward(model->forward(torch::randn({4, 8})).pow(2).mean());
    fabric.step(optimizer);
  }
  fabric.barrier("unsynchronized done");
  return 0;
}

// ---- FABRIC_CHECK_SYNC ------------------------------------------------------------

int run_sync(const Arguments& arguments) {
  fabric::Fabric fabric(
      fabric::Options().accelerator("cpu").devices(arguments.devices).strategy(arguments.strategy));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(9);
  Net model;
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  for (int step = 1; step <= 6; ++step) {
    torch::manual_seed(90 + 10 * step + this_rank);
    optimizer.zero_grad();
    if (arguments.how == "outside") {
      // Trained outside the Fabric (the migration could not reach the loop).
      model->forward(torch::randn({4, 8})).pow(2).mean().backward();
      optimizer.step();
      continue;
    }
    fabric.backward(model->forward(torch::randn({4, 8})).pow(2).mean());
    fabric.step(optimizer);
    if (this_rank == arguments.perturb_rank && step == arguments.perturb_step) {
      torch::NoGradGuard no_grad;
      model->first->weight[0][0] += 1e-3;  // behind the Fabric's back
      std::fprintf(stderr, "test: rank %d changed first.weight after step %d\n", this_rank, step);
    }
  }
  fabric.print("sync scenario done");
  return 0;
}


// ---- Parameters replaced after setup (issue 38) -------------------------------------

// A research trainer resumes after fabric.setup(), the way LibTorch code
// does it: torch::load(model, path), or an InputArchive read by the module's
// and the optimizer's own load() (LibTorch reads parameters with set_: new
// storage, where Python's load_state_dict copies in place); or it casts the
// set-up model (->to(kDouble)), or copies a teacher's weights under
// NoGradGuard. --how picks one (rank0_only: only rank 0 loads; copy_rank:
// each rank copies its own values). Every rank trains on its half of one
// global batch per step, 4 steps, never FABRIC_CHECK_SYNC; a plain model on
// the whole batch, resumed the same way, is the reference: the set-up
// model must match it (gradients averaged after the load) on every rank.
int run_replaced(const Arguments& arguments) {
  const std::string& how = arguments.how;
  const std::string dir = arguments.dir.empty() ? std::string("/tmp") : arguments.dir;
  fabric::Fabric fabric(
      fabric::Options().accelerator("cpu").devices(arguments.devices).strategy(arguments.strategy));
  fabric.launch();
  this_rank = fabric.global_rank();
  const int world = fabric.world_size();
  const std::string model_path = fabric.broadcast(fresh_checkpoint_path(dir, "replaced_model"));
  const std::string optimizer_path = model_path + ".optimizer";
  const auto batch = [](int step) {
    torch::manual_seed(700 + step);  // the same global batch on every rank
    auto inputs = torch::randn({8, 8});
    return std::make_pair(inputs, torch::randn({8, 4}));
  };
  // The checkpoint: a model and its Adam after one step, as an earlier run
  // saved them (rank 0 writes; every rank builds the same).
  torch::manual_seed(5);
  Net source;
  torch::optim::Adam source_optimizer(source->parameters(), 0.01);
  {
    const auto [inputs, targets] = batch(-1);
    torch::mse_loss(source->forward(inputs), targets).backward();
    source_optimizer.step();
  }
  if (fabric.is_global_zero()) {
    torch::save(source, model_path);
    torch::save(source_optimizer, optimizer_path);
  }
  fabric.barrier("checkpoint written");

  torch::manual_seed(50 + this_rank);  // the Fabric broadcasts rank 0's values at setup
  Net model;
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  // The reference: never set up, resumed the same way.
  Net reference;
  torch::optim::Adam reference_optimizer(reference->parameters(), 0.01);
  auto resume = [&](Net& net, torch::optim::Adam& adam, bool set_up) {
    if (how == "torch_load") {
      torch::load(net, model_path);
    } else if (how == "rank0_only") {
      if (!set_up || fabric.is_global_zero()) torch::load(net, model_path);
    } else if (how == "archive") {
      torch::serialize::InputArchive model_archive;
      model_archive.load_from(model_path);
      net->load(model_archive);
      torch::serialize::InputArchive optimizer_archive;
      optimizer_archive.load_from(optimizer_path);
      adam.load(optimizer_archive);
    } else if (how == "to_double") {
      torch::load(net, model_path);  // the same start as the reference's
      net->to(torch::kDouble);
    } else if (how == "copy_same" || how == "copy_rank") {
      torch::NoGradGuard no_grad;
      const auto teacher = source->parameters();
      auto own = net->parameters();
      for (size_t i = 0; i < own.size(); ++i) {
        own[i].copy_(teacher[i] * (how == "copy_rank" && set_up ? 1.0 + this_rank : 1.0));
      }
      for (auto& buffer : net->buffers()) buffer.copy_(source->offset);
    } else {
      fail("unknown --how=" + how);
    }
  };
  resume(model, optimizer, true);
  resume(reference, reference_optimizer, false);
  const auto dtype = how == "to_double" ? torch::kDouble : torch::kFloat;
  const int64_t per_rank = 8 / world;
  for (int step = 0; step < 4; ++step) {
    const auto [inputs, targets] = batch(step);
    optimizer.zero_grad();
    fabric.backward(torch::mse_loss(model->forward(inputs.narrow(0, this_rank * per_rank, per_rank).to(dtype)),
                                    targets.narrow(0, this_rank * per_rank, per_rank).to(dtype)));
    fabric.step(optimizer);
    reference_optimizer.zero_grad();
    torch::mse_loss(reference->forward(inputs.to(dtype)), targets.to(dtype)).backward();
    reference_optimizer.step();
  }
  const double difference = max_relative_difference(*model, *reference);
  std::fprintf(stderr, "test: rank %d: largest relative difference from the 1-process resume %.3g\n", this_rank,
               difference);
  check(difference < 1e-5, how + " after setup: rank " + std::to_string(this_rank) +
                               " differs from the 1-process resume by " + std::to_string(difference) +
                               " (gradients not averaged after the load?)");
  fabric.barrier("replaced done");
  if (fabric.is_global_zero()) {
    std::remove(model_path.c_str());
    std::remove(optimizer_path.c_str());
  }
  fabric.print("replaced scenario (" + how + ") done");
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "argv") return run_argv_report(argc, argv);
  const Arguments arguments = parse_arguments(argc, argv);
  if (arguments.scenario == "state") return run_state_checks(arguments);
  if (arguments.scenario == "resume") return run_resume(arguments);
  if (arguments.scenario == "save_twice") return run_save_twice(arguments);
  if (arguments.scenario == "load_step") return run_load_step(arguments);
  if (arguments.scenario == "log") return run_logging(arguments);
  if (arguments.scenario == "scaler") return run_scaler_checks(arguments);
  if (arguments.scenario == "ddp") return run_ddp_checks(arguments);
  if (arguments.scenario == "gradient_read") return run_gradient_read(arguments);
  if (arguments.scenario == "zero") return run_zero_checks(arguments);
  if (arguments.scenario == "fsdp_direct_step") return run_fsdp_direct_step(arguments);
  if (arguments.scenario == "fsdp_divergent_forward") return run_fsdp_divergent_forward(arguments);
  if (arguments.scenario == "unused") return run_unused_checks(arguments);
  if (arguments.scenario == "index_sampler") return run_index_sampler_checks(arguments);
  if (arguments.scenario == "hang") return run_hang(arguments);
  if (arguments.scenario == "by_value") return run_by_value_checks(arguments);
  if (arguments.scenario == "scalars") return run_scalar_checks(arguments);
  if (arguments.scenario == "load_fresh") return run_load_fresh(arguments);
  if (arguments.scenario == "diverge") return run_diverge(arguments);
  if (arguments.scenario == "late_work") return run_late_work(arguments);
  if (arguments.scenario == "paths") return run_paths(arguments);
  if (arguments.scenario == "unsynchronized") return run_unsynchronized(arguments);
  if (arguments.scenario == "sync") return run_sync(arguments);
  if (arguments.scenario == "replaced") return run_replaced(arguments);
  if (arguments.scenario == "phases") return run_phase_checks(arguments);
  if (arguments.scenario == "loose") return run_loose_checks(arguments);
  if (arguments.scenario == "banner") return run_banner(arguments);
  if (arguments.scenario == "rank_zero_file") return run_rank_zero_file(arguments);
  if (arguments.scenario == "fail") {
    try {
      return run_until_failure(arguments);
    } catch (const std::runtime_error& error) {
      std::fprintf(stderr, "test: caught '%s' after the Fabric was destroyed\n", error.what());
      return 4;
    }
  }
  std::cerr << "unknown scenario '" << arguments.scenario << "'\n";
  return 2;
}
