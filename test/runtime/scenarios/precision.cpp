// The multi-process runtime scenarios of one component ("16-mixed": the loss scaler on several ranks);
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

int run_scaler_checks(const Arguments& arguments) {
  fabric::Options::GradScalerOptions scaler;
  scaler.init_scale = 1024;
  scaler.growth_interval = 2;
  fabric::Fabric fabric(
      fabric::Options().accelerator("cpu").devices(arguments.devices).precision("16-mixed").grad_scaler(scaler));
  fabric.launch();
  this_rank = fabric.global_rank();
  const int rank = fabric.global_rank();
  torch::manual_seed(61);
  Net model;
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  const auto batch = [&](int step) {
    torch::manual_seed(900 + 10 * step + rank);  // different data per rank
    return torch::randn({6, 8});
  };

  // Step 0, clean: gradients come back unscaled and reduced: they equal the
  // mean over ranks of plain fp32 gradients of each rank's batch.
  optimizer.zero_grad();
  fabric.backward(model->forward(batch(0)).pow(2).mean());
  Net plain;
  {
    torch::NoGradGuard no_grad;
    const auto from = module_state(*model);
    const auto to = module_state(*plain);
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  }
  plain->forward(batch(0)).pow(2).mean().backward();
  const auto expected = fabric.all_reduce(plain->first->weight.grad(), fabric::ReduceOp::Mean);
  check(torch::allclose(model->first->weight.grad(), expected, 1e-5, 1e-7),
        "16-mixed gradients are not the unscaled mean of the ranks' gradients");
  optimizer.step();
  check(fabric.loss_scale() == 1024, "the scale changed after one clean step");

  // Step 1: an inf on the last rank only. Every rank must skip.
  const auto weights = model->first->weight.detach().clone();
  optimizer.zero_grad();
  auto loss = model->forward(batch(1)).pow(2).mean();
  if (rank == fabric.world_size() - 1) loss = loss * std::numeric_limits<float>::infinity();
  fabric.backward(loss);
  check(!model->first->weight.grad().defined(), "a rank kept inf gradients");
  optimizer.step();
  check(torch::equal(weights, model->first->weight), "a rank stepped on inf gradients");
  check(fabric.loss_scale() == 512, "the scale did not halve on every rank");
  for (int step = 2; step < 4; ++step) {
    optimizer.zero_grad();
    fabric.backward(model->forward(batch(step)).pow(2).mean());
    optimizer.step();
  }
  check(fabric.loss_scale() == 1024, "the scale did not grow after growth_interval clean steps");
  check(identical_across_ranks(fabric, *model), "ranks differ after 16-mixed training");

  // Gradients accumulated over several passes without zero_grad (two
  // synchronized ones, one under no_backward_sync, one more synchronized)
  // are unscaled once each, though the scale grows in between: they equal
  // the mean over ranks of the four plain fp32 gradients' sum.
  {
    Net plain_sum;
    {
      torch::NoGradGuard no_grad;
      const auto from = module_state(*model);
      const auto to = module_state(*plain_sum);
      for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
    }
    optimizer.zero_grad();
    fabric.backward(model->forward(batch(4)).pow(2).mean());
    fabric.backward(model->forward(batch(5)).pow(2).mean());
    {
      auto no_sync = fabric.no_backward_sync(model);
      fabric.backward(model->forward(batch(6)).pow(2).mean());
    }
    fabric.backward(model->forward(batch(7)).pow(2).mean());
    for (int step = 4; step < 8; ++step) plain_sum->forward(batch(step)).pow(2).mean().backward();
    const auto summed = fabric.all_reduce(plain_sum->first->weight.grad(), fabric::ReduceOp::Mean);
    check(torch::allclose(model->first->weight.grad(), summed, 1e-5, 1e-6),
          "16-mixed gradients accumulated over several backward passes are not the mean of the plain sums "
          "(off by " +
              std::to_string((model->first->weight.grad() - summed).abs().max().item<double>()) + ")");
    optimizer.step();
  }
  check_accumulation(fabric);
  fabric.print("scaler checks passed on", fabric.world_size(), "ranks");
  return 0;
}

}  // namespace fabric_test
