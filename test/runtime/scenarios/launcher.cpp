// The multi-process runtime scenarios of one component (the launcher: a rank that fails, the argv and environment each rank gets, output before launch());
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

int run_until_failure(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  this_rank = fabric.global_rank();  // known before launch() from the launcher's env
  if (arguments.fail_step < 0 && this_rank == arguments.fail_rank) std::exit(0);
  fabric.launch();
  torch::manual_seed(3);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  for (int step = 0; step < arguments.steps; ++step) {
    const auto loss = model->forward(torch::randn({32, 8})).pow(2).mean();
    optimizer.zero_grad();
    fabric.backward(loss);
    optimizer.step();
    if (this_rank == arguments.fail_rank && step == arguments.fail_step) {
      // Both streams, as a program's error path writes them (the launcher
      // prefixes a rank's lines with its rank; rank 0's stay as they are).
      std::cout << "test: rank " << this_rank << " reached step " << step << std::endl;
      std::fprintf(stderr, "test: rank %d fails now (%s)\n", this_rank, arguments.fail_how.c_str());
      if (arguments.fail_how == "sigkill") std::raise(SIGKILL);
      if (arguments.fail_how == "abort") std::abort();
      if (arguments.fail_how == "throw") throw std::runtime_error("test exception");
      std::exit(3);
    }
  }
  fabric.print("finished", arguments.steps, "steps without a failure");
  return 0;
}

// ---- fabric-run -------------------------------------------------------------

int run_argv_report(int argc, char** argv) {
  fabric::Fabric fabric;
  fabric.launch();
  this_rank = fabric.global_rank();
  check(argc >= 3, "argv: no output directory");
  const std::string prefix = std::string(argv[2]) + "/rank" + std::to_string(this_rank);
  {
    std::ofstream out(prefix + ".argv", std::ios::binary);
    for (int i = 3; i < argc; ++i) out << argv[i] << '\0';
  }
  std::ofstream out(prefix + ".env");
  for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                           "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "LT_ACCELERATOR",
                           "LT_DEVICES", "LT_STRATEGY", "LT_PRECISION", "LT_NUM_NODES"}) {
    const char* value = std::getenv(name);
    out << name << "=" << (value != nullptr ? value : "<unset>") << "\n";
  }
  out << "world_size()=" << fabric.world_size() << "\n";
  fabric.barrier("argv written");
  return 0;
}

// Output printed before fabric.launch() (an options banner) appears once,
// from rank 0; after launch() every rank prints as usual. --fail-rank=R:
// rank R (from the launcher's RANK) fails before launch(), on stderr.
int run_banner(const Arguments& arguments) {
  const char* rank_variable = std::getenv("RANK");
  const int rank_before_launch = rank_variable != nullptr && *rank_variable != '\0' ? std::atoi(rank_variable) : 0;
  std::cout << "BANNER: options devices=" << arguments.devices << std::endl;
  std::printf("PRINTF-BANNER (buffered)\n");  // flushed at launch(), or at exit
  std::fprintf(stderr, "STDERR-BEFORE-LAUNCH from rank %d\n", rank_before_launch);
  if (rank_before_launch == arguments.fail_rank) {
    std::fprintf(stderr, "rank %d: cannot start: bad option --fail-rank\n", rank_before_launch);
    return 3;
  }
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  fabric.print("AFTER-LAUNCH: rank 0 through fabric.print");
  if (fabric.global_rank() == 1) std::cout << "AFTER-LAUNCH: rank 1 through std::cout" << std::endl;
  if (fabric.global_rank() > 0) std::printf("AFTER-LAUNCH: printf of rank %d\n", fabric.global_rank());
  fabric.barrier("printed");
  return 0;
}

}  // namespace fabric_test
