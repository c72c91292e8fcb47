// What the multi-process scenarios share: their arguments, the check that
// fails a rank with a message, a small model, and checks across ranks.
// Header-only: each scenario file includes it.
#pragma once

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

namespace fabric_test {

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
inline bool square_net_blocks = false;
// --strided: layer0's weight is a transposed view (not contiguous), as a
// model that stores a weight as its transpose has: fsdp copies such a unit
// in and out instead of pointing it into the gathered buffer.
inline bool square_net_strided = false;

inline Arguments parse_arguments(int argc, char** argv) {
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

inline int this_rank = -1;

[[noreturn]] inline void fail(const std::string& what) {
  // One fputs on unbuffered stderr: one write, not interleaved with other ranks.
  const std::string line = "CHECK FAILED on rank " + std::to_string(this_rank) + ": " + what + "\n";
  std::fputs(line.c_str(), stderr);
  std::exit(1);
}

inline void check(bool condition, const std::string& what) {
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

inline std::vector<torch::Tensor> module_state(torch::nn::Module& module) {
  std::vector<torch::Tensor> state;
  for (const auto& parameter : module.parameters()) state.push_back(parameter.detach());
  for (const auto& buffer : module.buffers()) state.push_back(buffer.detach());
  return state;
}

// A checkpoint path that no earlier run left behind (a process id comes
// again, and a failed run leaves its checkpoint), in `folder`.
inline std::string fresh_checkpoint_path(const std::string& folder, const std::string& stem) {
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return folder + "/fabric_" + stem + "_" + std::to_string(::getpid()) + "_" + std::to_string(now) + ".pt";
}

// Removes a checkpoint: one file, or the directory fsdp's sharded save
// writes, with everything under it. (POSIX, not std::filesystem: LibTorch
// 2.x's libtorch.so exports its own copies of its symbols.)
inline void remove_checkpoint(const std::string& path) {
  const auto remove_one = [](const char* entry, const struct stat*, int, struct FTW*) {
    return std::remove(entry) == 0 ? 0 : -1;
  };
  ::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

// Whether every rank holds exactly the same values in every tensor.
inline bool identical_across_ranks(fabric::Fabric& fabric, torch::nn::Module& module) {
  bool identical = true;
  for (const auto& tensor : module_state(module)) {
    const auto largest = fabric.all_reduce(tensor, fabric::ReduceOp::Max);
    const auto smallest = fabric.all_reduce(tensor, fabric::ReduceOp::Min);
    identical = identical && torch::equal(largest, smallest);
  }
  return identical;
}

inline void check_parameters_synchronized(fabric::Fabric& fabric) {
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
inline void check_buffers_of_every_type(fabric::Fabric& fabric) {
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
inline void check_gradients(fabric::Fabric& fabric, torch::Dtype dtype, double tolerance) {
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

template <class Function>
std::string error_of(Function&& function) {
  try {
    function();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "";
}

inline void check_error(const std::string& error, const std::string& expected, const std::string& what) {
  check(!error.empty(), what + ": no exception");
  check(error.find(expected) != std::string::npos,
        what + ": the message '" + error + "' lacks '" + expected + "'");
}

inline void check_same_state(torch::nn::Module& a, torch::nn::Module& b, const std::string& what) {
  const auto from = module_state(a);
  const auto to = module_state(b);
  for (size_t i = 0; i < from.size(); ++i) check(torch::equal(from[i], to[i]), what);
}

inline void train_steps(fabric::Fabric& fabric, Net& model, torch::optim::Optimizer& optimizer,
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

inline bool identical_across_ranks(fabric::Fabric& fabric, const std::vector<torch::Tensor>& tensors) {
  bool identical = true;
  for (const auto& tensor : tensors) {
    const auto largest = fabric.all_reduce(tensor.detach(), fabric::ReduceOp::Max);
    const auto smallest = fabric.all_reduce(tensor.detach(), fabric::ReduceOp::Min);
    identical = identical && torch::equal(largest, smallest);
  }
  return identical;
}

// Bytes of the tensors an Adam holds, and for how many parameters.
inline std::pair<int64_t, int64_t> adam_state(const torch::optim::Adam& optimizer) {
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

// Exactly once each of 0..size-1 over all shards (pad = false).
inline void check_exact_cover(const std::vector<std::vector<int64_t>>& shards, size_t size,
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

// After backward each gradient is on its owner only (the others dropped).
inline bool gradients_on_owners(const std::string& strategy) { return strategy == "zero2" || strategy == "fsdp"; }

// The shape of PyTorch's C++ MNIST example: a Module subclass, no TORCH_MODULE.
struct PlainNet : torch::nn::Module {
  PlainNet()
      : first(register_module("first", torch::nn::Linear(8, 16))),
        second(register_module("second", torch::nn::Linear(16, 4))) {}
  torch::Tensor forward(const torch::Tensor& x) { return second(torch::tanh(first(x))); }
  torch::nn::Linear first;
  torch::nn::Linear second;
};

// Gradient accumulation (issue 27 point 2): under no_backward_sync only the
// pass that steps all-reduces, and the result equals all-reducing every
// pass.
inline void check_accumulation(fabric::Fabric& fabric) {
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

// fsdp on several ranks: a parameter's gradient is this rank's piece of it
// flattened (undefined where it holds none), the ranks' pieces in rank
// order. Where each of `gradients` starts in its parameter.
inline std::vector<int64_t> piece_offsets(fabric::Fabric& fabric, const std::vector<torch::Tensor>& gradients) {
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
inline torch::Tensor piece_of(const torch::Tensor& whole, const torch::Tensor& piece, int64_t offset) {
  return whole.reshape({-1}).narrow(0, offset, piece.numel());
}

inline double max_relative_difference(torch::nn::Module& a, torch::nn::Module& b) {
  const auto left = module_state(a);
  const auto right = module_state(b);
  double worst = 0;
  for (size_t i = 0; i < left.size(); ++i) {
    const double scale = std::max(1e-3, right[i].abs().max().item<double>());
    worst = std::max(worst, (left[i] - right[i]).abs().max().item<double>() / scale);
  }
  return worst;
}

// Every rank's indices of one epoch, in rank order.
inline std::vector<std::vector<int64_t>> gather_indices(fabric::Fabric& fabric,
                                                 const std::vector<int64_t>& local) {
  std::vector<std::vector<int64_t>> all;
  for (const auto& tensor : fabric.all_gather(torch::tensor(local, torch::kLong))) {
    const auto cpu = tensor.cpu();
    all.emplace_back(cpu.data_ptr<int64_t>(), cpu.data_ptr<int64_t>() + cpu.numel());
  }
  return all;
}

}  // namespace fabric_test
