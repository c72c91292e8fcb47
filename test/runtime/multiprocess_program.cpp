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
//   fabric_multiprocess_program fail --devices=N --fail-rank=R --fail-step=S
//       [--fail-how=exit|sigkill|throw] [--marker=...]
//       trains with all-reduce every step; rank R dies at step S (exit code 3
//       or SIGKILL, or an exception that leaves the Fabric's scope and makes
//       main return 4), or with S = -1 exits 0 before launch(). --marker only
//       tags the processes for the test driver.
#include <fabric/fabric.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

namespace {

struct Arguments {
  std::string scenario = "ddp";
  int devices = 2;
  int fail_rank = -1;
  int fail_step = 0;
  std::string fail_how = "exit";
  int steps = 3000;
};

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

  // A data set that does not divide evenly: every rank still runs the same
  // number of samples (padding), and all samples are seen.
  auto uneven_loader = fabric.setup_dataloader<samplers::RandomSampler>(
      IndexDataset(size + 1).map(Stack<>()), 4);
  check_partition(gather_indices(fabric, one_epoch(fabric, *uneven_loader)), size + 1,
                  "RandomSampler, uneven data set");
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
      fabric.broadcast("/tmp/fabric_checkpoint_" + std::to_string(::getpid()) + ".pt");
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
  if (fabric.is_global_zero()) std::remove(path.c_str());
}

int run_ddp_checks(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  check(fabric.world_size() == arguments.devices, "world size");
  check(fabric.local_rank() == fabric.global_rank() && fabric.node_rank() == 0, "ranks");

  check_parameters_synchronized(fabric);
  check_gradients(fabric, torch::kDouble, 1e-6);
  check_gradients(fabric, torch::kFloat, 1e-5);
  check_samplers(fabric);
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
      std::fprintf(stderr, "test: rank %d fails now (%s)\n", this_rank, arguments.fail_how.c_str());
      if (arguments.fail_how == "sigkill") std::raise(SIGKILL);
      if (arguments.fail_how == "throw") throw std::runtime_error("test exception");
      std::exit(3);
    }
  }
  fabric.print("finished", arguments.steps, "steps without a failure");
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  const Arguments arguments = parse_arguments(argc, argv);
  if (arguments.scenario == "ddp") return run_ddp_checks(arguments);
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
