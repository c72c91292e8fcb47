// Issue 27, point 6: LibTorch's default generator across the ranks of a job.
// Debian's LibTorch seeds it from /dev/urandom in every process, so a program
// that draws its task without seeding (a target function, a projection)
// would get a different task on every rank. After launch(), every rank of a
// program that did not seed draws rank 0's numbers; a program's own seed is
// left as it is.
//
//   default_generator_program SCENARIO --devices=N
//     unseeded      nothing seeds: the same numbers (and the same freshly
//                   made model) on every rank
//     seeded        torch::manual_seed(7) first in main: the numbers of seed 7
//                   on every rank (the runtime did not reseed)
//     per_rank      torch::manual_seed(100 + rank) after launch(): the ranks
//                   differ, as the program asked
//     drawn_before  an unseeded draw before the Fabric exists: it differs
//                   between the ranks (rank 0 says so on stderr, once); from
//                   launch() on the ranks agree
//
// Prints "default generator: <scenario> passed on N ranks" on rank 0, or
// "CHECK FAILED ..." and exits 1.
#include <fabric/fabric.h>
#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

int this_rank = -1;

[[noreturn]] void fail(const std::string& what) {
  const std::string line = "CHECK FAILED on rank " + std::to_string(this_rank) + ": " + what + "\n";
  std::fputs(line.c_str(), stderr);
  std::exit(1);
}

// Whether `tensor` holds the same values on every rank.
bool same_on_every_rank(fabric::Fabric& fabric, const torch::Tensor& tensor) {
  const torch::Tensor largest = fabric.all_reduce(tensor, fabric::ReduceOp::Max);
  const torch::Tensor smallest = fabric.all_reduce(tensor, fabric::ReduceOp::Min);
  return torch::equal(largest, smallest);
}

} // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  int devices = 2;
  for (int i = 2; i < argc; ++i) {
    const std::string argument = argv[i];
    if (argument.rfind("--devices=", 0) == 0) devices = std::stoi(argument.substr(10));
  }
  if (scenario != "unseeded" && scenario != "seeded" && scenario != "per_rank" &&
      scenario != "drawn_before") {
    std::fprintf(stderr, "unknown scenario '%s'\n", scenario.c_str());
    return 2;
  }
  if (scenario == "seeded") torch::manual_seed(7);
  torch::Tensor before;
  if (scenario == "drawn_before") before = torch::rand({8});

  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  if (fabric.world_size() != devices) fail("expected " + std::to_string(devices) + " ranks");

  if (scenario == "per_rank") torch::manual_seed(100 + static_cast<uint64_t>(fabric.global_rank()));
  const torch::Tensor drawn = torch::randn({16});
  torch::nn::Linear fresh(8, 4);  // a model made after launch(), from the same generator
  const bool same = same_on_every_rank(fabric, drawn);

  if (scenario == "per_rank") {
    if (same) fail("ranks seeded differently drew the same numbers: the runtime reseeded them");
  } else if (!same) {
    fail("the ranks drew different numbers after launch()");
  }
  if (scenario != "per_rank" && !same_on_every_rank(fabric, fresh->weight.detach())) {
    fail("a model made after launch() has different weights on the ranks");
  }
  if (scenario == "seeded") {
    at::Generator seven = at::detail::createCPUGenerator(7);
    const torch::Tensor expected = at::randn({16}, seven);
    if (!torch::equal(drawn, expected)) fail("the program's seed 7 was replaced by the runtime");
  }
  if (scenario == "drawn_before" && devices > 1 && same_on_every_rank(fabric, before)) {
    fail("the unseeded draw before the Fabric existed was the same on every rank (test premise)");
  }
  if (fabric.is_global_zero()) {
    std::printf("default generator: %s passed on %d ranks\n", scenario.c_str(), devices);
  }
  return 0;
}
