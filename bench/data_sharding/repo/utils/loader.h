// The repository's shared data code: an in-memory data set and the loader
// class every project uses (this-> style, as research repositories write it).
#pragma once
#include <torch/torch.h>

#include <random>
#include <tuple>
#include <vector>

namespace data {

class Table {
 public:
  Table() {}
  Table(int64_t samples, int64_t features, int64_t classes, uint64_t seed);
  size_t size() const { return static_cast<size_t>(this->x.size(0)); }
  void get(size_t index, std::tuple<torch::Tensor, torch::Tensor>& out) const;

 private:
  torch::Tensor x, y;
};

class TableLoader {
 public:
  TableLoader() {}
  TableLoader(Table& dataset_, size_t batch_size_, bool shuffle_);
  bool operator()(std::tuple<torch::Tensor, torch::Tensor>& batch);
  size_t get_count_max() const { return this->count_max; }

 private:
  Table dataset;
  size_t batch_size;
  bool shuffle;
  size_t size;
  std::vector<size_t> idx;
  size_t count;
  size_t count_max;
  std::mt19937 mt;
};

}  // namespace data
