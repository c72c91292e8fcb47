// The program the multi-node tests start on each test host (fabric-run or
// SLURM-style variables give it its rank, world size and node).
//
//   multinode_program [--steps N] [--dir D] [--save-at K] [--resume PATH]
//                     [--timeout-ms T] [--step-ms M]
//
// Trains a small MLP with DDP on data that depends only on the step and the
// global rank (so a job with the same world size on any node layout trains
// the same model), prints, on rank 0, each step's loss averaged over the
// ranks with full precision, and which node each rank ran on. --save-at
// writes D/ckpt.pt after step K; --resume continues from a checkpoint;
// --step-ms sleeps after each step (time for a test to break something).
#include <fabric/fabric.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

struct Arguments {
  int steps = 20;
  std::string dir = ".";
  int save_at = -1;
  std::string resume;
  int timeout_ms = 30000;
  int step_ms = 0;
};

Arguments parse(int argc, char** argv) {
  Arguments arguments;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string name = argv[i];
    const std::string value = argv[i + 1];
    if (name == "--steps") {
      arguments.steps = std::stoi(value);
    } else if (name == "--dir") {
      arguments.dir = value;
    } else if (name == "--save-at") {
      arguments.save_at = std::stoi(value);
    } else if (name == "--resume") {
      arguments.resume = value;
    } else if (name == "--timeout-ms") {
      arguments.timeout_ms = std::stoi(value);
    } else if (name == "--step-ms") {
      arguments.step_ms = std::stoi(value);
    } else {
      std::fprintf(stderr, "multinode_program: unknown option %s\n", name.c_str());
      std::exit(2);
    }
  }
  return arguments;
}

}  // namespace

int main(int argc, char** argv) {
  const Arguments arguments = parse(argc, argv);
  fabric::Fabric fabric(
      fabric::Options().accelerator("cpu").timeout(std::chrono::milliseconds(arguments.timeout_ms)));
  fabric.launch();

  // Which node each rank is on, as the runtime sees it.
  const auto nodes = fabric.all_gather(torch::tensor({static_cast<int64_t>(fabric.node_rank())}));
  std::string layout;
  for (const auto& node : nodes) layout += " " + std::to_string(node.item<int64_t>());
  fabric.print("world " + std::to_string(fabric.world_size()) + " nodes" + layout);

  torch::manual_seed(7);
  torch::nn::Sequential model(torch::nn::Linear(16, 32), torch::nn::Tanh(), torch::nn::Linear(32, 1));
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  fabric.setup(model, optimizer);
  int64_t step = 0;
  fabric::State state{{"model", model}, {"optimizer", optimizer}, {"step", step}};
  if (!arguments.resume.empty()) fabric.load(arguments.resume, state);

  const torch::Tensor target_weights = torch::linspace(-1, 1, 16).unsqueeze(1);
  while (step < arguments.steps) {
    // This rank's shard of the step's global batch.
    auto generator = at::detail::createCPUGenerator(static_cast<uint64_t>(step * 1000 + fabric.global_rank()));
    const torch::Tensor x = torch::randn({8, 16}, generator);
    const torch::Tensor y = torch::sin(x.matmul(target_weights));
    optimizer.zero_grad();
    const torch::Tensor loss = torch::mse_loss(model->forward(x), y);
    fabric.backward(loss);
    fabric.step(optimizer);
    ++step;
    const double mean = fabric.all_reduce(loss.detach()).item<double>();
    fabric.printf("step %lld loss %.9g\n", static_cast<long long>(step), mean);
    if (step == arguments.save_at) fabric.save(arguments.dir + "/ckpt.pt", state);
    if (arguments.step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(arguments.step_ms));
  }
  fabric.print("done after " + std::to_string(step) + " steps");
  return 0;
}
