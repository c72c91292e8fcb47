#include "dataset.h"

#include <utility>

DataSet::DataSet(torch::Tensor readings, torch::Tensor labels)
    : readings_(std::move(readings)), labels_(std::move(labels)) {}

torch::data::Example<> DataSet::get(size_t index) {
  return {readings_[index], labels_[index]};
}

torch::optional<size_t> DataSet::size() const { return labels_.size(0); }
