// fabric::DistributedIndexSampler and fabric::strided_shard, in one process:
// every rank's sampler is built here side by side. Built without LibTorch
// (see CMakeLists.txt), which also proves the header needs none.
#include <fabric/index_sampler.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

std::vector<std::vector<size_t>> shards_of_epoch(size_t size, size_t world, size_t epoch,
                                                 fabric::IndexSamplerOptions options) {
  std::vector<std::vector<size_t>> shards;
  for (size_t rank = 0; rank < world; ++rank) {
    shards.push_back(fabric::DistributedIndexSampler(size, world, rank, options).indices(epoch));
  }
  return shards;
}

std::vector<size_t> zero_to(size_t size) {
  std::vector<size_t> values(size);
  std::iota(values.begin(), values.end(), size_t{0});
  return values;
}

std::string invalid_argument_message(size_t size, size_t world, size_t rank) {
  try {
    fabric::DistributedIndexSampler sampler(size, world, rank);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

TEST(IndexSampler, WithoutPaddingTheShardsPartitionTheDataset) {
  for (size_t world : {2, 3, 7}) {
    for (size_t size : {1001, 1000, 5, 2, 0}) {
      const auto options = fabric::IndexSamplerOptions().pad(false);
      const auto shards = shards_of_epoch(size, world, 0, options);
      std::vector<size_t> all;
      for (size_t rank = 0; rank < world; ++rank) {
        const fabric::DistributedIndexSampler sampler(size, world, rank, options);
        EXPECT_EQ(shards[rank].size(), sampler.num_samples());
        EXPECT_EQ(shards[rank].size(), size / world + (rank < size % world ? 1 : 0))
            << "size " << size << ", world " << world << ", rank " << rank;
        all.insert(all.end(), shards[rank].begin(), shards[rank].end());
      }
      std::sort(all.begin(), all.end());
      EXPECT_EQ(all, zero_to(size)) << "size " << size << ", world " << world;
    }
  }
}

TEST(IndexSampler, PaddedShardsHaveEqualCountsAndCoverEverything) {
  for (size_t world : {2, 3, 7}) {
    for (size_t size : {1001, 1000, 5, 2}) {
      const fabric::IndexSamplerOptions options;  // pad by default
      const auto shards = shards_of_epoch(size, world, 4, options);
      const size_t per_rank = (size + world - 1) / world;
      std::map<size_t, size_t> copies;
      for (size_t rank = 0; rank < world; ++rank) {
        EXPECT_EQ(shards[rank].size(), per_rank) << "size " << size << ", world " << world;
        EXPECT_EQ(fabric::DistributedIndexSampler(size, world, rank, options).num_samples(), per_rank);
        for (size_t index : shards[rank]) ++copies[index];
      }
      ASSERT_EQ(copies.size(), size) << "not every index is in some shard";
      // The extra indices are the first ones of the permutation again
      // (several times round when the data set is smaller than the world).
      const auto order = fabric::DistributedIndexSampler(size, world, 0, options).permutation(4);
      for (size_t position = 0; position < size; ++position) {
        const size_t expected = per_rank * world / size + (position < per_rank * world % size ? 1 : 0);
        EXPECT_EQ(copies[order[position]], expected) << "position " << position;
      }
    }
  }
  // An empty data set gives every rank nothing, padded or not.
  EXPECT_TRUE(fabric::DistributedIndexSampler(0, 3, 1).indices(0).empty());
  EXPECT_EQ(fabric::DistributedIndexSampler(0, 3, 1).num_samples(), 0u);
}

TEST(IndexSampler, EveryRankDrawsTheSamePermutationAndTakesItsStride) {
  for (size_t world : {2, 3}) {
    for (bool pad : {true, false}) {
      const auto options = fabric::IndexSamplerOptions().seed(17).pad(pad);
      const size_t size = 1001;
      const auto order = fabric::DistributedIndexSampler(size, world, 0, options).permutation(2);
      for (size_t rank = 0; rank < world; ++rank) {
        const fabric::DistributedIndexSampler sampler(size, world, rank, options);
        EXPECT_EQ(sampler.permutation(2), order);
        const auto shard = sampler.indices(2);
        for (size_t k = 0; k < shard.size(); ++k) {
          ASSERT_EQ(shard[k], order[(rank + k * world) % size]) << "rank " << rank << ", k " << k;
        }
      }
    }
  }
}

TEST(IndexSampler, EachEpochAndSeedGivesAnotherOrder) {
  const fabric::DistributedIndexSampler sampler(1001, 3, 1);
  std::set<std::vector<size_t>> orders;
  for (size_t epoch = 0; epoch < 5; ++epoch) orders.insert(sampler.permutation(epoch));
  EXPECT_EQ(orders.size(), 5u);
  EXPECT_NE(sampler.indices(0), sampler.indices(1));
  EXPECT_EQ(sampler.indices(3), sampler.indices(3));
  const fabric::DistributedIndexSampler other_seed(1001, 3, 1, fabric::IndexSamplerOptions().seed(1));
  EXPECT_NE(other_seed.permutation(0), sampler.permutation(0));
  // seed + epoch: seed 1 at epoch 0 is seed 0 at epoch 1, as in PyTorch.
  EXPECT_EQ(other_seed.permutation(0), sampler.permutation(1));
  // Without shuffle: the indices in order, every epoch.
  const fabric::DistributedIndexSampler in_order(10, 3, 2, fabric::IndexSamplerOptions().shuffle(false));
  // Positions 2, 5, 8 and, padded, 11, which wraps around to index 1.
  EXPECT_EQ(in_order.indices(0), (std::vector<size_t>{2, 5, 8, 1}));
}

// The permutation is fixed by the C++ standard (std::mt19937_64) and this
// header's Fisher-Yates: the same on every platform, standard library and
// run, so a resumed job sees the orders it would have seen. The expected
// values come from an independent implementation of mt19937_64 (checked
// against the standard's 10000th value, 9981545732273789042).
TEST(IndexSampler, PermutationIsFixedAcrossRunsAndPlatforms) {
  EXPECT_EQ(fabric::DistributedIndexSampler(10, 1, 0).permutation(0),
            (std::vector<size_t>{7, 2, 0, 8, 3, 9, 6, 1, 5, 4}));
  EXPECT_EQ(fabric::DistributedIndexSampler(10, 1, 0, fabric::IndexSamplerOptions().seed(42))
                .permutation(3),
            (std::vector<size_t>{4, 7, 2, 8, 0, 5, 6, 3, 9, 1}));
  // seed + epoch wraps modulo 2^64.
  EXPECT_EQ(fabric::DistributedIndexSampler(12, 1, 0, fabric::IndexSamplerOptions().seed(UINT64_MAX))
                .permutation(2),
            (std::vector<size_t>{5, 3, 10, 4, 6, 2, 7, 11, 9, 0, 1, 8}));
}

TEST(IndexSampler, EveryOrderOfThreeIsEquallyLikely) {
  // Fisher-Yates with an unbiased draw: each of the 6 orders about 1000
  // times in 6000 epochs (a biased draw or Sattolo's variant, which never
  // leaves an element in place, would miss this by far).
  const fabric::DistributedIndexSampler sampler(3, 1, 0);
  std::map<std::vector<size_t>, int> counts;
  for (size_t epoch = 0; epoch < 6000; ++epoch) ++counts[sampler.permutation(epoch)];
  EXPECT_EQ(counts.size(), 6u);
  for (const auto& [order, count] : counts) {
    EXPECT_GT(count, 850);
    EXPECT_LT(count, 1150);
  }
}

TEST(IndexSampler, BadRankOrWorldSizeIsAnErrorThatNamesIt) {
  const std::string zero = invalid_argument_message(10, 0, 0);
  EXPECT_NE(zero.find("num_replicas is 0"), std::string::npos) << zero;
  const std::string rank = invalid_argument_message(10, 3, 3);
  EXPECT_NE(rank.find("rank 3 is not below num_replicas 3"), std::string::npos) << rank;
  EXPECT_NE(rank.find("fabric::DistributedIndexSampler"), std::string::npos) << rank;
  EXPECT_THROW(fabric::strided_shard(std::vector<int>{1, 2}, 2, 5), std::invalid_argument);
  EXPECT_THROW(fabric::strided_shard(std::vector<int>{1, 2}, 0, 0), std::invalid_argument);
}

TEST(IndexSampler, StridedShardOfAnyOrder) {
  const std::vector<int64_t> order{9, 4, 7, 1, 3};
  EXPECT_EQ(fabric::strided_shard(order, 2, 0, false), (std::vector<int64_t>{9, 7, 3}));
  EXPECT_EQ(fabric::strided_shard(order, 2, 1, false), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(fabric::strided_shard(order, 2, 1, true), (std::vector<int64_t>{4, 1, 9}));
  // Positions 3 and 7; 7 wraps around to position 2.
  EXPECT_EQ(fabric::strided_shard(order, 4, 3, true), (std::vector<int64_t>{1, 7}));
  EXPECT_EQ(fabric::strided_shard(order, 1, 0), order);
}

} // namespace
