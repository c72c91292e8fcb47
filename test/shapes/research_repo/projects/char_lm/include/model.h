#pragma once
#include <torch/torch.h>

namespace lm {

struct LMConfig {
  int64_t vocab = 16;
  int64_t embed = 32;
  int64_t hidden = 64;
  int64_t context = 3;  // tokens each prediction sees (causal convolution width)
};

// A tiny causal convolutional language model: embed, a causal Conv1d over
// the last `context` tokens, a two-layer tanh head over the vocabulary
// (Bengio et al.'s neural probabilistic LM, convolutional).
class CausalConvLMImpl : public torch::nn::Module {
 public:
  explicit CausalConvLMImpl(const LMConfig& cfg);
  // ids [N, T] -> logits [N, T, vocab]
  torch::Tensor forward(const torch::Tensor& ids);

 private:
  LMConfig cfg_;
  torch::nn::Embedding embed_{nullptr};
  torch::nn::Conv1d conv_{nullptr};
  torch::nn::Linear hidden_{nullptr}, out_{nullptr};
};
TORCH_MODULE(CausalConvLM);

}  // namespace lm
