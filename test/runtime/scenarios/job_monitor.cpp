// The multi-process runtime scenarios of one component (ranks that hang, leave the loop early, take other paths, work alone at the end, train unsynchronized, or drift apart (the sync check));
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

// Rank 1 does not join a collective: rank 0 must fail after the configured
// timeout with a message that says so (the driver measures the time).
int run_hang(const Arguments& arguments) try {
  {
    fabric::Fabric fabric(fabric::Options()
                              .accelerator("cpu")
                              .devices(arguments.devices)
                              .timeout(std::chrono::milliseconds(arguments.timeout_ms)));
    fabric.launch();
    this_rank = fabric.global_rank();
    fabric.barrier("joined");
    if (fabric.global_rank() == 1) {
      std::fprintf(stderr, "test: rank 1 sleeps\n");
      std::this_thread::sleep_for(std::chrono::seconds(60));
    }
    fabric.all_reduce(torch::ones({4}));
  }
  return 0;
} catch (const std::runtime_error& error) {
  std::fprintf(stderr, "test: rank %d caught: %s\n", this_rank, error.what());
  return 5;
}

int run_diverge(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(5);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  const std::string checkpoint = arguments.dir + "/diverge.pt";
  check(arguments.collective != "save" || !arguments.dir.empty(), "--collective=save needs --dir");
  for (int step = 0; step < arguments.steps; ++step) {
    torch::manual_seed(50 + 10 * step + this_rank);
    optimizer.zero_grad();
    const auto loss = model->forward(torch::randn({16, 8})).pow(2).mean();
    fabric.backward(loss);
    fabric.step(optimizer);
    // `if (loss < threshold) break;` on an un-reduced loss, in effect.
    if (this_rank == arguments.stop_rank && step == arguments.stop_step) {
      std::fprintf(stderr, "test: rank %d leaves the loop after step %d\n", this_rank, step);
      break;
    }
    if (arguments.collective == "barrier") fabric.barrier("end of step");
    if (arguments.collective == "all_reduce") fabric.all_reduce(loss.detach());
    if (arguments.collective == "save") fabric.save(checkpoint, model);
  }
  std::fprintf(stderr, "test: rank %d left the loop\n", this_rank);
  return 0;
}

// Rank R takes another path than the others at step K, and the ranks end up
// in different collectives while all of them still run:
//   scalar_after_loop: R leaves the loop and all-reduces its loss total (a
//     double) while the others are in the next backward (the migrated
//     early-stop program);
//   barrier: R enters fabric.barrier("rank-local checkpoint") while the
//     others are in the next backward;
//   broadcast: every step all-reduces 5 metrics; R broadcasts 3 values
//     instead;
//   skip_backward: R `continue`s past its backward (a per-rank NaN check),
//     and after the loop every rank all-reduces its loss total.
int run_paths(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(5);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  const std::string& path = arguments.path;
  check(path == "scalar_after_loop" || path == "barrier" || path == "broadcast" ||
            path == "skip_backward",
        "unknown --path '" + path + "'");
  double total = 0;
  for (int step = 0; step < arguments.steps; ++step) {
    torch::manual_seed(50 + 10 * step + this_rank);
    optimizer.zero_grad();
    const auto loss = model->forward(torch::randn({16, 8})).pow(2).mean();
    const bool differs = this_rank == arguments.stop_rank && step == arguments.stop_step;
    if (differs) std::fprintf(stderr, "test: rank %d takes path '%s' at step %d\n", this_rank, path.c_str(), step);
    if (differs && path == "skip_backward") continue;  // `if (isnan(my_loss)) continue;`
    if (differs && path == "barrier") fabric.barrier("rank-local checkpoint");
    fabric.backward(loss);
    fabric.step(optimizer);
    total += loss.item<double>();
    if (differs && path == "scalar_after_loop") break;  // `if (my_loss < x) break;`
    if (path == "broadcast") {
      if (differs) {
        fabric.broadcast(torch::ones({3}));
      } else {
        fabric.all_reduce(torch::ones({5}));
      }
    }
  }
  total = fabric.all_reduce(total, fabric::ReduceOp::Sum);
  std::fprintf(stderr, "test: rank %d left the loop (total %g)\n", this_rank, total);
  return 0;
}

int run_late_work(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(6);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  train_steps(fabric, model, optimizer, 0, 5, false);
  if (fabric.global_rank() == arguments.local_work_rank) {
    // Evaluation on one rank alone: no collective while the others have finished.
    std::fprintf(stderr, "test: rank %d works alone for %.1f s\n", this_rank, arguments.local_work_s);
    std::this_thread::sleep_for(std::chrono::duration<double>(arguments.local_work_s));
    std::printf("late work done\n");
  }
  return 0;
}

// ---- training that is not synchronized -----------------------------------------

int run_unsynchronized(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(8);
  Net model;
  // Parameter groups with a learning rate each: the shape that got no setup.
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(model->first->parameters(),
                      std::make_unique<torch::optim::SGDOptions>(0.01));
  groups.emplace_back(model->second->parameters(),
                      std::make_unique<torch::optim::SGDOptions>(0.1));
  torch::optim::SGD optimizer(std::move(groups), torch::optim::SGDOptions(0.01));
  if (arguments.setup) fabric.setup(model, optimizer);
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    fabric.backward(model->forward(torch::randn({4, 8})).pow(2).mean());
    fabric.step(optimizer);
  }
  fabric.barrier("unsynchronized done");
  return 0;
}

// ---- FABRIC_CHECK_SYNC ------------------------------------------------------------

int run_sync(const Arguments& arguments) {
  fabric::Fabric fabric(
      fabric::Options().accelerator("cpu").devices(arguments.devices).strategy(arguments.strategy));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(9);
  Net model;
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  for (int step = 1; step <= 6; ++step) {
    torch::manual_seed(90 + 10 * step + this_rank);
    optimizer.zero_grad();
    if (arguments.how == "outside") {
      // Trained outside the Fabric (the migration could not reach the loop).
      model->forward(torch::randn({4, 8})).pow(2).mean().backward();
      optimizer.step();
      continue;
    }
    fabric.backward(model->forward(torch::randn({4, 8})).pow(2).mean());
    fabric.step(optimizer);
    if (this_rank == arguments.perturb_rank && step == arguments.perturb_step) {
      torch::NoGradGuard no_grad;
      model->first->weight[0][0] += 1e-3;  // behind the Fabric's back
      std::fprintf(stderr, "test: rank %d changed first.weight after step %d\n", this_rank, step);
    }
  }
  fabric.print("sync scenario done");
  return 0;
}

}  // namespace fabric_test
