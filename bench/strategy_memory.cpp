// Peak resident memory per rank (VmHWM) and losses of one strategy, for
// compare_memory.py:
//
//   fabric_bench_memory --strategy=ddp|zero2|fsdp [--devices=2] [--steps=12]
//                       [--width=2048] [--layers=10]
//
// Trains an MLP of `layers` square Linear layers (width 2048, 10 layers:
// 42M parameters, 160 MiB) with Adam on one fixed global batch split across
// the ranks, so every strategy and rank count sees the same data, and
// prints one line:
//   strategy=... ranks=... parameters=... vmhwm_kib=<largest rank's peak>
//   step_ms=<mean, slowest rank> losses=<global mean loss per step, ...>
#include <fabric/fabric.h>

#include "bench_arguments.h"
#include "deep_mlp.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace {

// The process's peak resident set (VmHWM), in KiB.
int64_t peak_resident_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  const BenchArguments arguments(argc, argv);
  const std::string strategy = arguments.text("strategy", "ddp");
  const int devices = static_cast<int>(arguments.integer("devices", 2));
  const int steps = static_cast<int>(arguments.integer("steps", 12));
  const int64_t width = arguments.integer("width", 2048);
  const int layers = static_cast<int>(arguments.integer("layers", 10));
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(devices).strategy(strategy));
  fabric.launch();
  const int64_t global_batch = 48;  // divisible by 1, 2, 3, 4
  torch::manual_seed(7);
  const auto inputs = torch::randn({global_batch, width});
  const auto targets = torch::randn({global_batch, width});
  const int64_t per_rank = global_batch / fabric.world_size();
  const auto input = inputs.narrow(0, fabric.global_rank() * per_rank, per_rank);
  const auto target = targets.narrow(0, fabric.global_rank() * per_rank, per_rank);

  DeepMlp model(width, layers);
  int64_t parameters = 0;
  for (const auto& parameter : model->parameters()) parameters += parameter.numel();
  torch::optim::Adam optimizer(model->parameters(), 1e-4);
  const bool phases = std::getenv("FABRIC_BENCH_PHASES") != nullptr;
  if (phases) std::fprintf(stderr, "rank %d before setup: %lld KiB\n", fabric.global_rank(), (long long)peak_resident_kib());
  fabric.setup(model, optimizer);
  if (phases) std::fprintf(stderr, "rank %d after setup: %lld KiB\n", fabric.global_rank(), (long long)peak_resident_kib());

  std::ostringstream losses;
  double seconds = 0;
  for (int step = 0; step < steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    optimizer.zero_grad();
    const auto loss = torch::mse_loss(model->forward(input), target);
    fabric.backward(loss);
    fabric.step(optimizer);
    // Steps after the first (which creates the optimizer state).
    if (step > 0) seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double mean = fabric.all_reduce(loss.detach(), fabric::ReduceOp::Mean).item<double>();
    losses << (step > 0 ? "," : "") << std::to_string(mean);
    if (phases) std::fprintf(stderr, "rank %d after step %d: %lld KiB\n", fabric.global_rank(), step, (long long)peak_resident_kib());
  }
  const double step_ms =
      fabric.all_reduce(torch::tensor(seconds * 1000 / std::max(1, steps - 1), torch::kDouble), fabric::ReduceOp::Max)
          .item<double>();
  const int64_t peak = fabric.all_reduce(torch::tensor(peak_resident_kib()), fabric::ReduceOp::Max).item<int64_t>();
  if (fabric.is_global_zero()) {
    std::printf("strategy=%s ranks=%d parameters=%lld vmhwm_kib=%lld step_ms=%.1f losses=%s\n", strategy.c_str(),
                fabric.world_size(), static_cast<long long>(parameters), static_cast<long long>(peak), step_ms,
                losses.str().c_str());
    std::fflush(stdout);
  }
  return 0;
}
