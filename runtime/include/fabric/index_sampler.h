// fabric::DistributedIndexSampler: this rank's share of a dataset's indices,
// for programs with a DataLoader class of their own (one that walks a
// std::vector<size_t> of indices into its dataset). It does by hand what
// Fabric::setup_dataloader does for torch::data loaders, the way PyTorch's
// DistributedSampler does it:
//
//   auto sampler = fabric.index_sampler(dataset.size());   // or constructed directly
//   for (size_t epoch = 0; epoch < epochs; ++epoch) {
//     loader.reset(sampler.indices(epoch));   // every rank: its own share, reshuffled
//     ...
//   }
//
// Every rank draws the same permutation of 0..size-1 (seeded with
// seed + epoch) and takes the positions rank, rank + num_replicas, ... of it.
// The permutation is the same on every platform and standard library:
// std::mt19937_64's output is fixed by the C++ standard, and the shuffle is
// Fisher-Yates with an unbiased bounded draw written here (std::shuffle and
// std::uniform_int_distribution are implementation-defined).
//
// Needs no LibTorch: the header stands alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace fabric {

// How a DistributedIndexSampler orders and splits the indices.
//   IndexSamplerOptions().shuffle(false).pad(false)
class IndexSamplerOptions {
 public:
  // A new permutation every epoch (default), or the indices in order.
  IndexSamplerOptions& shuffle(bool value) noexcept {
    shuffle_ = value;
    return *this;
  }
  // The permutation of epoch e is drawn from seed + e. Every rank must use
  // the same seed (the default, 0, is).
  IndexSamplerOptions& seed(uint64_t value) noexcept {
    seed_ = value;
    return *this;
  }
  // true (default, for training): every rank gets ceil(size / num_replicas)
  // indices, the last shards filled up with indices from the start of the
  // permutation, so that every rank runs the same number of steps (a rank
  // with one batch fewer would leave the others waiting in the gradient
  // all-reduce). false (for evaluation): every index exactly once over all
  // ranks; the first size % num_replicas ranks get one index more.
  IndexSamplerOptions& pad(bool value) noexcept {
    pad_ = value;
    return *this;
  }

  bool shuffle() const noexcept { return shuffle_; }
  uint64_t seed() const noexcept { return seed_; }
  bool pad() const noexcept { return pad_; }

 private:
  bool shuffle_ = true;
  uint64_t seed_ = 0;
  bool pad_ = true;
};

// The elements of `order` at positions rank, rank + num_replicas, ...: one
// rank's share of a sequence every rank holds in the same order. With `pad`,
// every rank gets ceil(order.size() / num_replicas) elements (the sequence is
// repeated from its start to fill the last shards); without it, the shares
// cover `order` exactly once. Throws std::invalid_argument when num_replicas
// is 0 or rank >= num_replicas.
template <class T>
std::vector<T> strided_shard(const std::vector<T>& order, size_t num_replicas, size_t rank, bool pad = true);

class DistributedIndexSampler {
 public:
  // Throws std::invalid_argument, naming the value, when num_replicas is 0
  // or rank >= num_replicas.
  DistributedIndexSampler(size_t dataset_size, size_t num_replicas, size_t rank,
                          IndexSamplerOptions options = IndexSamplerOptions())
      : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), options_(options) {
    check_rank(num_replicas, rank, "fabric::DistributedIndexSampler");
  }

  // This rank's indices into the dataset for `epoch`, in the order to visit
  // them; num_samples() of them. The same epoch gives the same indices.
  std::vector<size_t> indices(size_t epoch) const {
    return strided_shard(permutation(epoch), num_replicas_, rank_, options_.pad());
  }
  // The whole permutation of 0..dataset_size-1 that every rank draws for
  // `epoch` (the identity without shuffle).
  std::vector<size_t> permutation(size_t epoch) const {
    std::vector<size_t> order(dataset_size_);
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    if (!options_.shuffle() || order.size() < 2) return order;
    // Seeded with seed + epoch (modulo 2^64), as PyTorch's DistributedSampler.
    std::mt19937_64 generator(options_.seed() + static_cast<uint64_t>(epoch));
    for (size_t i = order.size() - 1; i > 0; --i) {
      const auto j = static_cast<size_t>(uniform_below(generator, static_cast<uint64_t>(i) + 1));
      std::swap(order[i], order[j]);
    }
    return order;
  }

  // How many indices indices() returns on this rank, every epoch.
  size_t num_samples() const noexcept { return num_samples_of(rank_); }
  // The same for any rank (equal on every rank with pad). 0 for a rank
  // outside 0..num_replicas-1.
  size_t num_samples_of(size_t rank) const noexcept {
    if (rank >= num_replicas_) return 0;
    if (options_.pad()) return (dataset_size_ + num_replicas_ - 1) / num_replicas_;
    return dataset_size_ / num_replicas_ + (rank < dataset_size_ % num_replicas_ ? 1 : 0);
  }

  size_t dataset_size() const noexcept { return dataset_size_; }
  size_t num_replicas() const noexcept { return num_replicas_; }
  size_t rank() const noexcept { return rank_; }
  const IndexSamplerOptions& options() const noexcept { return options_; }

  // For strided_shard and Fabric::shard, which check their arguments alike.
  static void check_rank(size_t num_replicas, size_t rank, const char* who) {
    if (num_replicas == 0) {
      throw std::invalid_argument(std::string(who) +
                                  ": num_replicas is 0; it must be the number of processes "
                                  "(the world size), at least 1");
    }
    if (rank >= num_replicas) {
      throw std::invalid_argument(std::string(who) + ": rank " + std::to_string(rank) + " is not below num_replicas " +
                                  std::to_string(num_replicas) + "; ranks are 0.." + std::to_string(num_replicas - 1));
    }
  }

 private:
  // Uniform in [0, bound), bound >= 1, without modulo bias: draws in the
  // last, incomplete run of `bound` values below 2^64 are rejected.
  static uint64_t uniform_below(std::mt19937_64& generator, uint64_t bound) {
    const uint64_t rejected_below = (0 - bound) % bound;  // 2^64 mod bound
    for (;;) {
      const uint64_t draw = generator();
      if (draw >= rejected_below) return draw % bound;
    }
  }

  size_t dataset_size_;
  size_t num_replicas_;
  size_t rank_;
  IndexSamplerOptions options_;
};

template <class T>
std::vector<T> strided_shard(const std::vector<T>& order, size_t num_replicas, size_t rank, bool pad) {
  DistributedIndexSampler::check_rank(num_replicas, rank, "fabric::strided_shard");
  const size_t size = order.size();
  // With pad, position p >= size stands for order[p % size] (PyTorch
  // repeats the list as often as needed, which is the same).
  const size_t end = pad ? (size + num_replicas - 1) / num_replicas * num_replicas : size;
  std::vector<T> shard;
  shard.reserve(end > rank ? (end - rank + num_replicas - 1) / num_replicas : 0);
  for (size_t position = rank; position < end; position += num_replicas) {
    shard.push_back(order[position % size]);
  }
  return shard;
}

}  // namespace fabric
