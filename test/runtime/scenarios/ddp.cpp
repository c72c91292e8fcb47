// The multi-process runtime scenarios of one component (ddp: parameters and buffers identical across ranks, gradients equal to one process on the whole batch, samplers, collectives, checkpoints, accumulation; fsdp/zero gradient reads);
// test/runtime/multiprocess_program.cpp dispatches to them by name.
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

#include "scenarios/scenarios.h"
#include "scenarios/support.h"

namespace fabric_test {

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

}  // namespace fabric_test
