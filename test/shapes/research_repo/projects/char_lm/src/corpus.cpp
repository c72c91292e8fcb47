#include "corpus.h"

namespace lm {

void write_synthetic_corpus(const std::string& path, int64_t length, int64_t vocab, double p_next,
                            const torch::Tensor& successor) {
  auto ids = torch::empty({1, length}, torch::kLong);
  auto acc = ids.accessor<int64_t, 2>();
  auto follow = torch::rand({length}) < p_next;
  auto uniform = torch::randint(vocab, {length}, torch::kLong);
  auto succ = successor.accessor<int64_t, 1>();
  auto f = follow.accessor<bool, 1>();
  auto u = uniform.accessor<int64_t, 1>();
  acc[0][0] = u[0];
  for (int64_t t = 1; t < length; ++t) {
    acc[0][t] = f[t] ? succ[acc[0][t - 1]] : u[t];
  }
  torch::save(ids, path);
}

TokenWindows::TokenWindows(const std::string& path, int64_t seq_len, int64_t stride) : seq_len_(seq_len) {
  torch::load(ids_, path);
  for (int64_t i = 0; i + seq_len < ids_.size(1); i += stride) {
    starts_.push_back(i);
  }
}

torch::data::Example<> TokenWindows::get(size_t index) {
  const int64_t start = starts_.at(index);
  auto row = ids_[0];
  return {row.slice(0, start, start + seq_len_), row.slice(0, start + 1, start + seq_len_ + 1)};
}

torch::optional<size_t> TokenWindows::size() const { return starts_.size(); }

}  // namespace lm
