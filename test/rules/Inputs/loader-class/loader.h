// Loader classes of the project's own, as research code writes them.
#pragma once
#include <torch/torch.h>

#include <random>
#include <vector>

struct Samples {
  size_t size() const;
  torch::Tensor get(size_t index) const;
  torch::Tensor label(size_t index) const;
};

struct Batch {
  torch::Tensor x, y;
};

// An index vector filled in the constructor, shuffled in reset().
class IndexLoader {
 public:
  IndexLoader(const Samples& ds, size_t batch_size, bool shuffle, unsigned seed = 1);
  bool operator()(Batch& batch);
  void reset();
  size_t num_batches() const { return (indices_.size() + batch_size_ - 1) / batch_size_; }
  size_t dataset_size() const { return ds_.size(); }

 private:
  const Samples& ds_;
  size_t batch_size_;
  bool shuffle_;
  std::vector<size_t> indices_;
  size_t cursor_;
  std::mt19937 rng_;
};

// The `this->` style: the epoch's length computed once in the constructor,
// the order shuffled when the first batch of an epoch is asked for.
namespace DataLoader {
class ImageFolder {
 public:
  ImageFolder() {}
  ImageFolder(Samples& dataset_, const size_t batch_size_, const bool shuffle_, const bool drop_last_);
  bool operator()(Batch& data);
  void reset();
  size_t get_count_max();

 private:
  Samples dataset;
  size_t batch_size;
  bool shuffle;
  bool drop_last;
  size_t size;
  std::vector<size_t> idx;
  size_t count;
  size_t count_max;
  std::mt19937 mt;
};
}  // namespace DataLoader

// Positions wrap around the data set's size.
class RingLoader {
 public:
  RingLoader(const Samples& ds, size_t bs);
  Batch next();
  void reset();

 private:
  const Samples& ds_;
  size_t bs_;
  std::vector<size_t> order_;
  size_t cursor_ = 0;
  std::mt19937 rng_{7};
};

// Batches of random samples, drawn with an engine of its own seeded by its
// maker: seeded per rank (each rank draws its own batches).
class RandomLoader {
 public:
  RandomLoader(const Samples& ds, size_t bs, unsigned seed);
  Batch next_batch();

 private:
  const Samples& ds_;
  size_t bs_;
  std::mt19937 gen_;
};

// A data set that draws its samples once, in generate(): its engine keeps
// its seed (the same data on every rank).
class NoisyTable {
 public:
  explicit NoisyTable(unsigned seed) : gen_(seed) {}
  void generate(size_t n);
  torch::Tensor get(size_t i) const { return rows_[i]; }

 private:
  std::mt19937 gen_;
  std::vector<torch::Tensor> rows_;
};

// Its epoch is a number of steps it was given, not the data's length.
class StepLoader {
 public:
  StepLoader(const Samples& ds, size_t bs, size_t steps);
  bool next(Batch& batch);

 private:
  const Samples& ds_;
  size_t bs_;
  size_t steps_per_epoch_;
  std::vector<size_t> order_;
  size_t cursor_ = 0;
  std::mt19937 rng_{3};
};
