// Gradient accumulation with and without no_backward_sync (issue 27 point 2),
// in one run, on the same ranks:
//
//   fabric_bench_accumulation [--devices=2] [--accumulate=4] [--steps=12]
//                             [--width=1024] [--layers=6]
//
// Each optimizer step accumulates `accumulate` micro-batches. "every pass"
// all-reduces the gradients on each backward (what a migrated loop did before
// fabricize wrote the scope); "no_backward_sync" keeps them local on all but
// the last micro-batch, as the migration now writes:
//   auto no_sync = fabric.no_backward_sync(model, m + 1 < accumulate);
// Prints all-reduces per optimizer step and step time (slowest rank, best of
// 3 rounds) of each, the ratio of the times, and checks that both reach the
// same parameters.
#include <fabric/fabric.h>

#include "bench_arguments.h"
#include "deep_mlp.h"

#include <algorithm>
#include <chrono>
#include <string>

namespace {

struct Measured {
  double step_ms = 0;
  double all_reduces_per_step = 0;
  torch::Tensor parameters;
};

} // namespace

int main(int argc, char** argv) {
  const BenchArguments arguments(argc, argv);
  const int devices = static_cast<int>(arguments.integer("devices", 2));
  const int accumulate = static_cast<int>(arguments.integer("accumulate", 4));
  const int steps = static_cast<int>(arguments.integer("steps", 12));
  const int64_t width = arguments.integer("width", 1024);
  const int layers = static_cast<int>(arguments.integer("layers", 6));
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(devices));
  fabric.launch();

  const auto run = [&](bool no_sync_scope) {
    torch::manual_seed(1);  // the same model for both
    DeepMlp model(width, layers);
    torch::optim::SGD optimizer(model->parameters(), 1e-3);
    fabric.setup(model, optimizer);
    torch::manual_seed(100 + fabric.global_rank());
    std::vector<torch::Tensor> inputs, targets;
    for (int m = 0; m < accumulate; ++m) {
      inputs.push_back(torch::randn({16, width}));
      targets.push_back(torch::randn({16, width}));
    }
    const auto step = [&] {
      optimizer.zero_grad();
      for (int m = 0; m < accumulate; ++m) {
        auto no_sync = fabric.no_backward_sync(model, no_sync_scope && m + 1 < accumulate);
        fabric.backward(torch::mse_loss(model->forward(inputs[m]), targets[m]) / accumulate);
      }
      fabric.step(optimizer);
    };
    Measured measured;
    measured.step_ms = 1e9;
    for (int round = 0; round < 3; ++round) {
      step();  // warm-up
      fabric.barrier("bench start");
      const uint64_t before = fabric.gradient_synchronizations();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < steps; ++i) step();
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      measured.all_reduces_per_step = static_cast<double>(fabric.gradient_synchronizations() - before) / steps;
      const double slowest =
          fabric.all_reduce(torch::tensor(elapsed / steps, torch::kDouble), fabric::ReduceOp::Max).item<double>();
      measured.step_ms = std::min(measured.step_ms, 1e3 * slowest);
    }
    std::vector<torch::Tensor> flat;
    for (const auto& parameter : model->parameters()) flat.push_back(parameter.detach().flatten());
    measured.parameters = torch::cat(flat);
    return measured;
  };
  const Measured every = run(false);
  const Measured scoped = run(true);
  const double difference = (every.parameters - scoped.parameters).abs().max().item<double>();
  fabric.printf("ranks=%d accumulate=%d parameters=%lld\n", fabric.world_size(), accumulate,
                static_cast<long long>(every.parameters.numel()));
  fabric.printf("every pass:       all_reduces_per_step=%.2f step_ms=%.2f\n", every.all_reduces_per_step,
                every.step_ms);
  fabric.printf("no_backward_sync: all_reduces_per_step=%.2f step_ms=%.2f\n", scoped.all_reduces_per_step,
                scoped.step_ms);
  fabric.printf("step time ratio (no_backward_sync / every pass): %.2f; max parameter difference %.2e\n",
                scoped.step_ms / every.step_ms, difference);
  return difference < 1e-4 ? 0 : 1;
}
