// The multi-process runtime scenarios of one component (fabric.index_sampler() and fabric.shard());
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

// Every rank's vector, in rank order (gathered through the Fabric).
template <class Index>
std::vector<std::vector<int64_t>> gather_vectors(fabric::Fabric& fabric,
                                                 const std::vector<Index>& local) {
  return gather_indices(fabric, std::vector<int64_t>(local.begin(), local.end()));
}

// Rank r's share must be the positions r, r + world, ... of `order`
// (wrapping around past its end when padded).
void check_strided(const std::vector<std::vector<int64_t>>& shards,
                   const std::vector<int64_t>& order, const std::string& what) {
  const size_t world = shards.size();
  for (size_t r = 0; r < world; ++r) {
    for (size_t k = 0; k < shards[r].size(); ++k) {
      check(shards[r][k] == order[(r + k * world) % order.size()],
            what + ": rank " + std::to_string(r) + "'s element " + std::to_string(k) +
                " is not position " + std::to_string(r + k * world) + " of the shared order");
    }
  }
}


// Padded: ceil(size / world) on every rank, every index at least once, and
// the extra ones are the first positions of the order again.
void check_padded_cover(const std::vector<std::vector<int64_t>>& shards,
                        const std::vector<int64_t>& order, const std::string& what) {
  const size_t world = shards.size();
  const size_t per_rank = (order.size() + world - 1) / world;
  std::set<int64_t> seen;
  for (size_t r = 0; r < world; ++r) {
    check(shards[r].size() == per_rank, what + ": rank " + std::to_string(r) + " got " +
                                            std::to_string(shards[r].size()) + " indices, not " +
                                            std::to_string(per_rank));
    seen.insert(shards[r].begin(), shards[r].end());
  }
  check(seen.size() == order.size(), what + ": not every index is in some shard");
  check_strided(shards, order, what);
}

// DistributedIndexSampler through fabric.index_sampler() and fabric.shard()
// on real ranks (issue 26): a data set of 1001 samples, which no world size
// of 2 or 3 divides.
int run_index_sampler_checks(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  const size_t world = static_cast<size_t>(fabric.world_size());
  const size_t size = 1001;
  check(size % world != 0, "the data set size divides the world size (the check would prove less)");

  const auto sampler = fabric.index_sampler(size);
  check(sampler.num_replicas() == world && sampler.rank() == static_cast<size_t>(this_rank),
        "index_sampler does not use the world size and the global rank");
  const auto order0 = sampler.permutation(0);
  const auto orders = gather_vectors(fabric, order0);
  for (const auto& order : orders) {
    check(order == orders[0], "ranks drew different permutations for epoch 0");
  }
  const auto padded0 = gather_vectors(fabric, sampler.indices(0));
  check_padded_cover(padded0, orders[0], "index_sampler epoch 0, padded");
  check(sampler.num_samples() == padded0[static_cast<size_t>(this_rank)].size(),
        "num_samples() is not the number of indices");
  const auto padded1 = gather_vectors(fabric, sampler.indices(1));
  check(padded1 != padded0, "epoch 1 has the same order as epoch 0");
  check_padded_cover(padded1, gather_vectors(fabric, sampler.permutation(1))[0],
                     "index_sampler epoch 1, padded");
  check(gather_vectors(fabric, sampler.indices(0)) == padded0, "epoch 0 drawn twice differs");

  const auto evaluation = fabric.index_sampler(size, fabric::IndexSamplerOptions().pad(false));
  for (size_t epoch : {0, 1}) {
    const auto shards = gather_vectors(fabric, evaluation.indices(epoch));
    check_exact_cover(shards, size, "index_sampler epoch " + std::to_string(epoch) + ", pad=false");
    check_strided(shards, gather_vectors(fabric, evaluation.permutation(epoch))[0],
                  "index_sampler, pad=false");
  }
  const auto in_order = fabric.index_sampler(size, fabric::IndexSamplerOptions().shuffle(false).pad(false));
  const auto sequential = in_order.indices(3);
  for (size_t k = 0; k < sequential.size(); ++k) {
    check(sequential[k] == static_cast<size_t>(this_rank) + k * world,
          "shuffle(false): not the positions rank, rank + world, ...");
  }

  // The program's own shuffle, seeded differently on every rank (as with
  // std::random_device): shard() gives a disjoint cover of rank 0's order.
  std::vector<size_t> own(size);
  std::iota(own.begin(), own.end(), size_t{0});
  std::mt19937 generator(4242 + static_cast<unsigned>(this_rank));
  std::shuffle(own.begin(), own.end(), generator);
  const auto own_orders = gather_vectors(fabric, own);
  for (size_t r = 1; r < world; ++r) {
    check(own_orders[r] != own_orders[0], "the ranks' own shuffles agree (the check would prove nothing)");
  }
  const auto exact = gather_vectors(fabric, fabric.shard(own, /*pad=*/false));
  check_exact_cover(exact, size, "shard(pad=false) of differently shuffled vectors");
  check_strided(exact, own_orders[0], "shard(pad=false) takes rank 0's order");
  const auto padded = gather_vectors(fabric, fabric.shard(own));
  check_padded_cover(padded, own_orders[0], "shard() of differently shuffled vectors");

  // Other index types come back as they went in.
  std::vector<int> small(own.begin(), own.end());
  const std::vector<int> small_shard = fabric.shard(std::move(small), false);
  check_exact_cover(gather_vectors(fabric, small_shard), size, "shard of std::vector<int>");
  std::vector<int64_t> wide(own.begin(), own.end());
  check(gather_vectors(fabric, fabric.shard(wide, false)) == exact, "shard of std::vector<int64_t>");

  // A rank with another number of indices: the same error on every rank.
  std::vector<size_t> uneven(this_rank == 1 ? size - 1 : size, 0);
  const std::string error = error_of([&] { fabric.shard(uneven); });
  check_error(error, "rank 0 has 1001 indices and rank 1 has 1000", "shard of vectors of different lengths");
  check(fabric.shard(std::vector<size_t>{}).empty(), "shard of an empty vector is not empty");

  fabric.print("index sampler checks passed on", world, "ranks");
  return 0;
}

}  // namespace fabric_test
