#pragma once
// Token streams and the windows a language model trains on.
#include <string>
#include <vector>

#include <torch/torch.h>

namespace lm {

// A stream of `length` token ids from a Markov source over `vocab` symbols:
// each symbol has one likely successor (probability `p_next`), the rest of
// the mass is spread uniformly. Written to `path` with torch::save as a
// [1, length] int64 tensor, like the tokenizer's output.
void write_synthetic_corpus(const std::string& path, int64_t length, int64_t vocab, double p_next,
                            const torch::Tensor& successor);

// Fixed-length windows over a token file: input ids [seq_len] and the ids
// shifted by one as targets.
class TokenWindows : public torch::data::datasets::Dataset<TokenWindows> {
 public:
  TokenWindows(const std::string& path, int64_t seq_len, int64_t stride);

  torch::data::Example<> get(size_t index) override;
  torch::optional<size_t> size() const override;
  int64_t num_tokens() const { return ids_.size(1); }

 private:
  torch::Tensor ids_;  // [1, length]
  int64_t seq_len_;
  std::vector<int64_t> starts_;
};

}  // namespace lm
