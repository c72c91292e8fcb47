// What fsdp's trigger costs per operator (docs/runtime.md "fsdp"):
//
//   fabric_bench_materializer [--width=256] [--layers=8] [--batch=32] [--steps=200]
//
// One process, no communication: the step time (forward, backward, SGD) of
// an MLP plain, then with a StorageMaterializer whose one group (a tensor
// the model never reads) is released, so that its RecordFunction callback
// boxes and scans every operator's inputs, as under fsdp between uses.
// Small layers make the per-operator cost visible; prints both times and
// their ratio, best of 3 rounds, measured in the same run.
#include "bench_arguments.h"
#include "deep_mlp.h"
#include "strategies/storage_materializer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  const BenchArguments arguments(argc, argv);
  const int64_t width = arguments.integer("width", 256);
  const int layers = static_cast<int>(arguments.integer("layers", 8));
  const int64_t batch = arguments.integer("batch", 32);
  const int steps = static_cast<int>(arguments.integer("steps", 200));
  torch::manual_seed(1);
  DeepMlp model(width, layers);
  torch::optim::SGD optimizer(model->parameters(), 1e-3);
  const auto input = torch::randn({batch, width});
  const auto target = torch::randn({batch, width});
  const auto time_steps = [&] {
    double best = 1e9;
    for (int round = 0; round < 3; ++round) {
      const auto start = std::chrono::steady_clock::now();
      for (int step = 0; step < steps; ++step) {
        optimizer.zero_grad();
        torch::mse_loss(model->forward(input), target).backward();
        optimizer.step();
      }
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return best * 1000 / steps;
  };
  const double plain_ms = time_steps();
  double with_callback_ms = 0;
  {
    auto unrelated = torch::zeros({1024});
    fabric::detail::StorageMaterializer materializer([](size_t) {});
    materializer.add_group({unrelated});
    materializer.release(0);
    with_callback_ms = time_steps();
  }
  const double plain_again_ms = time_steps();
  std::printf("MLP %d x Linear(%lld, %lld), batch %lld, %d steps, best of 3\n", layers, static_cast<long long>(width),
              static_cast<long long>(width), static_cast<long long>(batch), steps);
  std::printf("plain                 %8.3f ms/step\n", std::min(plain_ms, plain_again_ms));
  std::printf("materializer callback %8.3f ms/step  ratio %.3f\n", with_callback_ms,
              with_callback_ms / std::min(plain_ms, plain_again_ms));
  return 0;
}
