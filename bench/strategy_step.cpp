// Per-rank memory and step time of one strategy, for compare_strategies.py:
//
//   fabric_bench_strategy --strategy=ddp|zero1|zero2 [--devices=2] [--steps=30]
//                         [--width=1024] [--layers=6]
//
// Trains an MLP of `layers` square Linear layers with Adam (fabric.backward
// + fabric.step) and prints, for the rank holding the most:
//   state_bytes     bytes of Adam state tensors (exp_avg, exp_avg_sq)
//   gradient_bytes  bytes of the gradients held between backward and step
//   step_ms         mean step time (slowest rank), best of 3 rounds
//   run_ms          mean step time over every step of the run, from the
//                   first (slowest rank): what a run-wide cost such as the
//                   sampled sync check adds shows here (sync_check_cost.py)
//   run_s           the run's training time, every step (slowest rank)
//   checks          sync checks run during it (fabric.sync_check_cost())
//   check_s         their wall time (the rank that spent the most)
// as one line "strategy=... state_bytes=... gradient_bytes=... step_ms=... run_ms=... run_s=... checks=... check_s=...".
#include <fabric/fabric.h>

#include "bench_arguments.h"
#include "deep_mlp.h"

#include <algorithm>
#include <chrono>
#include <string>

namespace {

int64_t max_over_ranks(fabric::Fabric& fabric, int64_t value) {
  return fabric.all_reduce(torch::tensor(value), fabric::ReduceOp::Max).item<int64_t>();
}

} // namespace

int main(int argc, char** argv) {
  const BenchArguments arguments(argc, argv);
  const std::string strategy = arguments.text("strategy", "ddp");
  const int devices = static_cast<int>(arguments.integer("devices", 2));
  const int steps = static_cast<int>(arguments.integer("steps", 30));
  const int64_t width = arguments.integer("width", 1024);
  const int layers = static_cast<int>(arguments.integer("layers", 6));
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(devices).strategy(strategy));
  fabric.launch();
  torch::manual_seed(fabric.global_rank());
  const auto input = torch::randn({32, width});
  const auto target = torch::randn({32, width});

  DeepMlp model(width, layers);
  torch::optim::Adam optimizer(model->parameters(), 1e-4);
  fabric.setup(model, optimizer);
  int64_t gradient_bytes = 0;
  const auto step = [&](bool measure) {
    optimizer.zero_grad();
    fabric.backward(torch::mse_loss(model->forward(input), target));
    if (measure) {
      gradient_bytes = 0;
      for (const auto& parameter : model->parameters()) {
        if (parameter.grad().defined()) gradient_bytes += parameter.grad().numel() * 4;
      }
    }
    fabric.step(optimizer);
  };
  const auto run_start = std::chrono::steady_clock::now();
  int run_steps = 1;
  step(true);
  int64_t state_bytes = 0;
  for (const auto& item : optimizer.state()) {
    const auto& state = static_cast<const torch::optim::AdamParamState&>(*item.second);
    state_bytes += (state.exp_avg().numel() + state.exp_avg_sq().numel()) * 4;
  }

  double best = 1e9;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 3; ++i) step(false);
    fabric.barrier("bench start");
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) step(false);
    fabric.barrier("bench end");
    run_steps += 3 + steps;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
    best = std::min(best, fabric.all_reduce(torch::tensor(elapsed, torch::kDouble),
                                            fabric::ReduceOp::Max)
                              .item<double>());
  }
  const double run_total = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  const double run_max =
      fabric.all_reduce(torch::tensor(run_total / run_steps, torch::kDouble), fabric::ReduceOp::Max).item<double>();
  const auto check_cost = fabric.sync_check_cost();
  const double check_max =
      fabric.all_reduce(torch::tensor(check_cost.seconds, torch::kDouble), fabric::ReduceOp::Max).item<double>();
  const int64_t parameter_bytes = [&] {
    int64_t bytes = 0;
    for (const auto& parameter : model->parameters()) bytes += parameter.numel() * 4;
    return bytes;
  }();
  const int64_t state_max = max_over_ranks(fabric, state_bytes);
  const int64_t gradient_max = max_over_ranks(fabric, gradient_bytes);
  fabric.printf("strategy=%s ranks=%d parameter_bytes=%lld state_bytes=%lld gradient_bytes=%lld "
                "step_ms=%.3f run_ms=%.3f run_s=%.4f checks=%lld check_s=%.5f\n",
                fabric.options().strategy().c_str(), fabric.world_size(),
                static_cast<long long>(parameter_bytes), static_cast<long long>(state_max),
                static_cast<long long>(gradient_max), 1e3 * best, 1e3 * run_max, run_max * run_steps,
                static_cast<long long>(check_cost.checks), check_max);
  return 0;
}
