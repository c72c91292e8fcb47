// The multi-process runtime scenarios of one component (fabric.all_reduce of scalars of every type);
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

template <class T>
void expect_scalar(T actual, T expected, const std::string& what) {
  check(actual == expected, "all_reduce(" + what + ") gave " + std::to_string(actual) +
                                ", expected " + std::to_string(expected));
}

int run_scalar_checks(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  const int rank = this_rank;
  const int world = fabric.world_size();
  using fabric::ReduceOp;

  // Each rank holds rank + 1 (scaled): sums, means, extremes are known.
  const double sum = world * (world + 1) / 2.0;
  double total_loss = 0.25 * (rank + 1);
  total_loss = fabric.all_reduce(total_loss, ReduceOp::Sum);
  static_assert(std::is_same<decltype(fabric.all_reduce(total_loss, ReduceOp::Sum)), double>::value,
                "double in, double out");
  expect_scalar(total_loss, 0.25 * sum, "double, Sum");
  expect_scalar(fabric.all_reduce(0.5 * (rank + 1)), 0.5 * sum / world, "double, default Mean");
  float accuracy = 0.125f * static_cast<float>(rank + 1);
  static_assert(std::is_same<decltype(fabric.all_reduce(accuracy, ReduceOp::Sum)), float>::value,
                "float in, float out");
  expect_scalar(fabric.all_reduce(accuracy, ReduceOp::Max), 0.125f * static_cast<float>(world),
                "float, Max");
  expect_scalar(fabric.all_reduce(accuracy, ReduceOp::Mean), static_cast<float>(0.125 * sum / world),
                "float, Mean");

  int correct = 10 * (rank + 1);
  correct = fabric.all_reduce(correct, ReduceOp::Sum);
  static_assert(std::is_same<decltype(fabric.all_reduce(correct, ReduceOp::Sum)), int>::value,
                "int in, int out");
  expect_scalar(correct, static_cast<int>(10 * sum), "int, Sum");
  expect_scalar(fabric.all_reduce(-rank, ReduceOp::Min), -(world - 1), "int, Min");
  // Beyond double's exact integers: reduced as int64_t, exact.
  const int64_t big = (int64_t{1} << 53) + 1;
  expect_scalar(fabric.all_reduce(big + rank, ReduceOp::Sum),
                static_cast<int64_t>(world) * big + static_cast<int64_t>(sum) - world, "int64_t, Sum");
  expect_scalar(fabric.all_reduce(big + rank, ReduceOp::Max), big + world - 1, "int64_t, Max");
  long samples = 1000L * (rank + 1);
  expect_scalar(fabric.all_reduce(samples, ReduceOp::Sum), static_cast<long>(1000 * sum), "long, Sum");
  size_t seen = static_cast<size_t>(64 * (rank + 1));
  static_assert(std::is_same<decltype(fabric.all_reduce(seen, ReduceOp::Sum)), size_t>::value,
                "size_t in, size_t out");
  expect_scalar(fabric.all_reduce(seen, ReduceOp::Sum), static_cast<size_t>(64 * sum), "size_t, Sum");
  unsigned batches = 3u + static_cast<unsigned>(rank);
  expect_scalar(fabric.all_reduce(batches, ReduceOp::Min), 3u, "unsigned, Min");
  expect_scalar(fabric.all_reduce(rank == world - 1, ReduceOp::Max), true, "bool, Max (any)");
  expect_scalar(fabric.all_reduce(rank == world - 1, ReduceOp::Min), false, "bool, Min (all)");

  // Integer Mean is refused on every rank, and the group still works.
  check_error(error_of([&] { fabric.all_reduce(correct, ReduceOp::Mean); }), "ReduceOp::Mean of an integer",
              "Mean of an int");
  // int32 overflow of the sum: every rank throws std::overflow_error.
  bool overflowed = false;
  try {
    fabric.all_reduce(std::numeric_limits<int>::max() - rank, ReduceOp::Sum);
  } catch (const std::overflow_error&) {
    overflowed = true;
  }
  check(overflowed, "an int Sum beyond INT_MAX did not throw std::overflow_error");
  fabric.barrier("scalars done");
  fabric.print("scalar checks passed on", world, "ranks");
  return 0;
}

}  // namespace fabric_test
