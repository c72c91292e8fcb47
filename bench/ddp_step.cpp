// Cost of a Fabric DDP training step, measured in one run on this machine:
//
//   fabric_bench_ddp_step [--devices=2] [--steps=100] [--width=512]
//   (build with -DFABRIC_BUILD_BENCH=ON; 3 interleaved rounds, best of each)
//
// Every rank times, on the same MLP and per-rank batch:
//   local      plain LibTorch: forward, backward, step (no communication)
//   fabric     fabric.backward + fabric.step: c10d Reducer, bucketed
//              all-reduce overlapped with backward
//   reducer    the same c10d::Reducer driven by hand on a process group of
//              its own (what a careful user writes without Fabric): the
//              floor Fabric's bookkeeping is measured against
//   naive      backward, then one blocking all-reduce per parameter (what
//              PyTorch's own C++ distributed example does)
//   all-reduce one bare Gloo all-reduce of a flat tensor holding as many
//              bytes as the model's gradients
// and rank 0 prints the mean step times and the ratios fabric/reducer,
// fabric/local, naive/fabric, and Fabric's exposed synchronization time
// (fabric - local) against the bare all-reduce. Not a test: numbers depend
// on the machine and its load.
#include <fabric/fabric.h>

#include "hand_reducer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

namespace {

struct MlpImpl : torch::nn::Module {
  explicit MlpImpl(int64_t width)
      : first(register_module("first", torch::nn::Linear(width, width))),
        second(register_module("second", torch::nn::Linear(width, width))),
        third(register_module("third", torch::nn::Linear(width, width))),
        last(register_module("last", torch::nn::Linear(width, 10))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return last(torch::relu(third(torch::relu(second(torch::relu(first(x)))))));
  }
  torch::nn::Linear first, second, third, last;
};
TORCH_MODULE(Mlp);

template <class Step>
double seconds_per_step(fabric::Fabric& fabric, int steps, Step&& step) {
  for (int i = 0; i < 5; ++i) step();  // warm-up (and the Reducer's bucket rebuild)
  fabric.barrier("bench start");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  fabric.barrier("bench end");
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The slowest rank decides the step time.
  return fabric.all_reduce(torch::tensor(elapsed / steps, torch::kDouble), fabric::ReduceOp::Max)
      .item<double>();
}

} // namespace

int main(int argc, char** argv) {
  int devices = 2;
  int steps = 100;
  int64_t width = 512;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    if (argument.rfind("--devices=", 0) == 0) devices = std::stoi(argument.substr(10));
    if (argument.rfind("--steps=", 0) == 0) steps = std::stoi(argument.substr(8));
    if (argument.rfind("--width=", 0) == 0) width = std::stoll(argument.substr(8));
  }
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(devices));
  fabric.launch();
  torch::manual_seed(fabric.global_rank());
  const auto input = torch::randn({64, width});
  const auto target = torch::randint(0, 10, {64});
  const auto loss_of = [&](Mlp& model) {
    return torch::nll_loss(torch::log_softmax(model->forward(input), 1), target);
  };

  Mlp local(width);
  torch::optim::SGD local_optimizer(local->parameters(), 0.01);
  const auto local_step = [&] {
    local_optimizer.zero_grad();
    loss_of(local).backward();
    local_optimizer.step();
  };
  Mlp ddp(width);
  torch::optim::SGD ddp_optimizer(ddp->parameters(), 0.01);
  fabric.setup(ddp, ddp_optimizer);
  const auto fabric_step = [&] {
    ddp_optimizer.zero_grad();
    fabric.backward(loss_of(ddp));
    fabric.step(ddp_optimizer);
  };

  // The hand-written loop: PyTorch DDP's recipe on c10d directly.
  Mlp hand(width);
  torch::optim::SGD hand_optimizer(hand->parameters(), 0.01);
  fabric_bench::HandReducer reducer(fabric, hand->parameters());
  const auto reducer_step = [&] {
    hand_optimizer.zero_grad();
    reducer.before_forward();
    const auto loss = loss_of(hand);
    reducer.before_backward();
    loss.backward();
    hand_optimizer.step();
  };

  Mlp naive(width);
  torch::optim::SGD naive_optimizer(naive->parameters(), 0.01);
  const auto naive_step = [&] {
    naive_optimizer.zero_grad();
    loss_of(naive).backward();
    for (auto& parameter : naive->parameters()) {
      parameter.mutable_grad() = fabric.all_reduce(parameter.grad(), fabric::ReduceOp::Mean);
    }
    naive_optimizer.step();
  };

  int64_t gradient_numel = 0;
  for (const auto& parameter : ddp->parameters()) gradient_numel += parameter.numel();
  std::vector<at::Tensor> flat{torch::ones({gradient_numel})};
  const auto bare_all_reduce = [&] { reducer.group()->allreduce(flat)->wait(); };

  // Interleaved rounds, best of each: a shared machine's load then hits all
  // of them alike instead of whichever ran during a busy moment.
  double local_time = 1e9, fabric_time = 1e9, reducer_time = 1e9, naive_time = 1e9,
         bare_time = 1e9;
  for (int round = 0; round < 3; ++round) {
    local_time = std::min(local_time, seconds_per_step(fabric, steps, local_step));
    fabric_time = std::min(fabric_time, seconds_per_step(fabric, steps, fabric_step));
    reducer_time = std::min(reducer_time, seconds_per_step(fabric, steps, reducer_step));
    naive_time = std::min(naive_time, seconds_per_step(fabric, steps, naive_step));
    bare_time = std::min(bare_time, seconds_per_step(fabric, steps, bare_all_reduce));
  }

  fabric.printf("ranks %d, width %lld (%.2f M parameters, %.1f MiB of gradients), %d steps, "
                "batch 64 per rank, %d intra-op threads per rank\n",
                fabric.world_size(), static_cast<long long>(width), gradient_numel / 1e6,
                gradient_numel * 4.0 / (1 << 20), steps, torch::get_num_threads());
  fabric.printf("step time: local %.3f ms, fabric DDP %.3f ms, hand-written Reducer loop %.3f ms, "
                "naive per-parameter all-reduce %.3f ms\n",
                1e3 * local_time, 1e3 * fabric_time, 1e3 * reducer_time, 1e3 * naive_time);
  fabric.printf("bare Gloo all-reduce of the gradient bytes %.3f ms; fabric's exposed sync "
                "(fabric - local) %.3f ms\n",
                1e3 * bare_time, 1e3 * (fabric_time - local_time));
  fabric.printf("ratio fabric/reducer %.3f, fabric/local %.2f, naive/fabric %.2f, "
                "exposed sync / bare all-reduce %.2f\n",
                fabric_time / reducer_time, fabric_time / local_time, naive_time / fabric_time,
                (fabric_time - local_time) / bare_time);
  return 0;
}
