#include "loader.h"

#include <algorithm>
#include <cmath>
#include <numeric>

IndexLoader::IndexLoader(const Samples& ds, size_t batch_size, bool shuffle, unsigned seed)
    : ds_(ds), batch_size_(batch_size), shuffle_(shuffle), indices_(ds.size()), cursor_(0), rng_(seed) {
  std::iota(indices_.begin(), indices_.end(), 0);
  reset();
}

void IndexLoader::reset() {
  cursor_ = 0;
  if (shuffle_) {
    std::shuffle(indices_.begin(), indices_.end(), rng_);
  }
}

bool IndexLoader::operator()(Batch& batch) {
  if (cursor_ >= indices_.size()) return false;
  const size_t end = std::min(cursor_ + batch_size_, indices_.size());
  std::vector<torch::Tensor> xs, ys;
  for (size_t i = cursor_; i < end; ++i) {
    xs.push_back(ds_.get(indices_[i]));
    ys.push_back(ds_.label(indices_[i]));
  }
  batch.x = torch::stack(xs);
  batch.y = torch::stack(ys);
  cursor_ = end;
  return true;
}

DataLoader::ImageFolder::ImageFolder(Samples& dataset_, const size_t batch_size_, const bool shuffle_,
                                     const bool drop_last_) {
  this->dataset = dataset_;
  this->batch_size = batch_size_;
  this->shuffle = shuffle_;
  this->drop_last = drop_last_;
  this->size = this->dataset.size();
  this->idx = std::vector<size_t>(this->size);
  for (size_t i = 0; i < this->size; i++) {
    this->idx.at(i) = i;
  }
  this->count = 0;
  if (this->drop_last) {
    this->count_max = std::floor((float)this->size / (float)this->batch_size);
  } else {
    this->count_max = std::ceil((float)this->size / (float)this->batch_size);
  }
  this->mt.seed(std::rand());
}

bool DataLoader::ImageFolder::operator()(Batch& data) {
  size_t idx_start = this->batch_size * this->count;
  size_t idx_end = std::min(this->size, (idx_start + this->batch_size));
  size_t mini_batch_size = idx_end - idx_start;
  if ((this->count == 0) && this->shuffle) {
    std::shuffle(this->idx.begin(), this->idx.end(), this->mt);
  } else if (this->count == this->count_max) {
    this->count = 0;
    return false;
  }
  std::vector<torch::Tensor> xs, ys;
  for (size_t i = 0; i < mini_batch_size; i++) {
    xs.push_back(this->dataset.get(this->idx.at(idx_start + i)));
    ys.push_back(this->dataset.label(this->idx.at(idx_start + i)));
  }
  data = {torch::stack(xs), torch::stack(ys)};
  this->count++;
  return true;
}

void DataLoader::ImageFolder::reset() { this->count = 0; }

size_t DataLoader::ImageFolder::get_count_max() { return this->count_max; }

RingLoader::RingLoader(const Samples& ds, size_t bs) : ds_(ds), bs_(bs) {
  order_.resize(ds_.size());
  std::iota(order_.begin(), order_.end(), 0);
}

void RingLoader::reset() { std::shuffle(order_.begin(), order_.end(), rng_); }

Batch RingLoader::next() {
  std::vector<torch::Tensor> xs, ys;
  for (size_t k = 0; k < bs_; ++k) {
    const size_t id = order_[(cursor_ + k) % ds_.size()];
    xs.push_back(ds_.get(id));
    ys.push_back(ds_.label(id));
  }
  cursor_ += bs_;
  return {torch::stack(xs), torch::stack(ys)};
}

StepLoader::StepLoader(const Samples& ds, size_t bs, size_t steps) : ds_(ds), bs_(bs), steps_per_epoch_(steps) {
  for (size_t i = 0; i < ds_.size(); ++i) order_.push_back(i);
  std::shuffle(order_.begin(), order_.end(), rng_);
}

bool StepLoader::next(Batch& batch) {
  if (cursor_ >= steps_per_epoch_ * bs_) return false;
  std::vector<torch::Tensor> xs, ys;
  for (size_t k = 0; k < bs_; ++k) {
    xs.push_back(ds_.get(order_[cursor_ + k]));
    ys.push_back(ds_.label(order_[cursor_ + k]));
  }
  cursor_ += bs_;
  batch = {torch::stack(xs), torch::stack(ys)};
  return true;
}

RandomLoader::RandomLoader(const Samples& ds, size_t bs, unsigned seed) : ds_(ds), bs_(bs), gen_(seed) {}

Batch RandomLoader::next_batch() {
  std::uniform_int_distribution<size_t> pick(0, ds_.size() - 1);
  std::vector<torch::Tensor> xs, ys;
  for (size_t k = 0; k < bs_; ++k) {
    const size_t id = pick(gen_);
    xs.push_back(ds_.get(id));
    ys.push_back(ds_.label(id));
  }
  return {torch::stack(xs), torch::stack(ys)};
}

void NoisyTable::generate(size_t n) {
  std::normal_distribution<float> noise(0.f, 1.f);
  for (size_t i = 0; i < n; ++i) rows_.push_back(torch::tensor({static_cast<int64_t>(noise(gen_) * 100)}));
}
