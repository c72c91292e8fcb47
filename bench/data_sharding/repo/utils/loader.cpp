#include "loader.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace data {

Table::Table(int64_t samples, int64_t features, int64_t classes, uint64_t seed) {
  torch::manual_seed(seed);
  auto centers = torch::randn({classes, features}) * 2.0;
  this->y = torch::randint(classes, {samples}, torch::kLong);
  this->x = centers.index_select(0, this->y) + torch::randn({samples, features});
}

void Table::get(size_t index, std::tuple<torch::Tensor, torch::Tensor>& out) const {
  out = {this->x[static_cast<int64_t>(index)], this->y[static_cast<int64_t>(index)]};
}

TableLoader::TableLoader(Table& dataset_, size_t batch_size_, bool shuffle_) {
  this->dataset = dataset_;
  this->batch_size = batch_size_;
  this->shuffle = shuffle_;
  this->size = this->dataset.size();
  this->idx = std::vector<size_t>(this->size);
  for (size_t i = 0; i < this->size; i++) {
    this->idx.at(i) = i;
  }
  this->count = 0;
  this->count_max = std::ceil((float)this->size / (float)this->batch_size);
  this->mt.seed(std::rand());
}

bool TableLoader::operator()(std::tuple<torch::Tensor, torch::Tensor>& batch) {
  size_t idx_start = this->batch_size * this->count;
  size_t idx_end = std::min(this->size, idx_start + this->batch_size);
  if ((this->count == 0) && this->shuffle) {
    std::shuffle(this->idx.begin(), this->idx.end(), this->mt);
  } else if (this->count == this->count_max) {
    this->count = 0;
    return false;
  }
  std::vector<torch::Tensor> xs, ys;
  std::tuple<torch::Tensor, torch::Tensor> sample;
  for (size_t i = idx_start; i < idx_end; i++) {
    this->dataset.get(this->idx.at(i), sample);
    xs.push_back(std::get<0>(sample));
    ys.push_back(std::get<1>(sample));
  }
  batch = {torch::stack(xs), torch::stack(ys)};
  this->count++;
  return true;
}

}  // namespace data
