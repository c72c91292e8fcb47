// The multi-process runtime scenarios of one component (zero1/zero2 and fsdp: owners, gradients, steps and checkpoints against ddp);
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

void copy_state(torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  const auto source = module_state(from);
  const auto target = module_state(to);
  for (size_t i = 0; i < source.size(); ++i) target[i].copy_(source[i]);
}

// A body and two heads: forward(x, head) runs the body, then head 0 or 1.
struct TwoHeads : torch::nn::Module {
  TwoHeads()
      : body(register_module("body", torch::nn::Linear(8, 64))),
        head0(register_module("head0", torch::nn::Linear(64, 32))),
        head1(register_module("head1", torch::nn::Linear(64, 32))) {}
  torch::Tensor forward(const torch::Tensor& x, int head) {
    const auto hidden = torch::tanh(body(x));
    return head == 0 ? head0(hidden) : head1(hidden);
  }
  torch::nn::Linear body, head0, head1;
};

// A micro-batch under no_backward_sync reaches a head that the
// synchronizing pass does not (each head its own fsdp unit at
// --fsdp-min-num-params=1000): its accumulated gradient is still averaged
// and stepped, as ddp's would be.
void check_accumulation_unreached(fabric::Fabric& fabric) {
  torch::manual_seed(71);
  auto model = std::make_shared<TwoHeads>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  fabric.setup(model, optimizer);
  TwoHeads plain;
  copy_state(*model, plain);
  torch::manual_seed(80 + fabric.global_rank());  // every rank its own data
  const auto first = torch::randn({5, 8});
  const auto second = torch::randn({5, 8});
  optimizer.zero_grad();
  {
    auto no_sync = fabric.no_backward_sync(model);
    fabric.backward(model->forward(first, 1).pow(2).mean());
  }
  fabric.backward(model->forward(second, 0).pow(2).mean());
  fabric.step(optimizer);
  plain.forward(first, 1).pow(2).mean().backward();
  plain.forward(second, 0).pow(2).mean().backward();
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

// zero2: each rank's backward reaches its own head (rank r uses head
// r % 2), the heads and the body in buckets of their own at the tests' small
// bucket cap: a bucket whose gradients a rank never accumulates still takes
// part, in the same order on every rank, and the step matches the ranks'
// average gradient (zero where a rank did not reach), two passes running.
void check_reach_per_rank(fabric::Fabric& fabric) {
  torch::manual_seed(73);
  auto model = std::make_shared<TwoHeads>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  fabric.setup(model, optimizer);
  TwoHeads plain;
  copy_state(*model, plain);
  const int head = fabric.global_rank() % 2;
  for (int pass = 0; pass < 2; ++pass) {
    torch::manual_seed(90 + 10 * pass + fabric.global_rank());  // every rank its own data
    const auto input = torch::randn({6, 8});
    optimizer.zero_grad();
    fabric.backward(model->forward(input, head).pow(2).mean());
    fabric.step(optimizer);
    for (auto& parameter : plain.parameters()) parameter.mutable_grad() = torch::Tensor();
    plain.forward(input, head).pow(2).mean().backward();
    torch::NoGradGuard no_grad;
    for (auto& parameter : plain.parameters()) {
      const auto gradient = parameter.grad().defined() ? parameter.grad() : torch::zeros_like(parameter);
      parameter.sub_(0.1 * fabric.all_reduce(gradient, fabric::ReduceOp::Mean));
    }
  }
  const double difference = max_relative_difference(*model, plain);
  check(difference < 1e-5, "with each rank reaching its own head, the parameters differ from a step on the ranks' "
                           "average gradient by " +
                               std::to_string(difference));
  check(identical_across_ranks(fabric, *model), "ranks differ after passes that reach different heads");
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
    // (fsdp refuses forwards that differ between ranks: runtime.fsdp_divergent_forward_2proc.)
    if (strategy == "zero2") check_reach_per_rank(fabric);
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

}  // namespace fabric_test
