// One default generator seed for the ranks of a job.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

namespace fabric {
namespace detail {

// At launch() of a job of several ranks: every rank whose program has not
// seeded LibTorch's default generator (torch::manual_seed, seed_everything)
// takes rank 0's seed through the store, so unseeded programs draw the same
// numbers on every rank; a rank that drew from it unseeded before launch()
// is noted on stderr by rank 0.
void agree_on_default_generator(c10d::Store& store, int rank, std::chrono::milliseconds timeout);

}  // namespace detail
}  // namespace fabric
