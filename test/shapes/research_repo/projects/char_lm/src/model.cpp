#include "model.h"

namespace lm {

CausalConvLMImpl::CausalConvLMImpl(const LMConfig& cfg) : cfg_(cfg) {
  embed_ = register_module("embed", torch::nn::Embedding(cfg.vocab, cfg.embed));
  conv_ = register_module("conv", torch::nn::Conv1d(torch::nn::Conv1dOptions(cfg.embed, cfg.hidden, cfg.context)));
  hidden_ = register_module("hidden", torch::nn::Linear(cfg.hidden, cfg.hidden));
  out_ = register_module("out", torch::nn::Linear(cfg.hidden, cfg.vocab));
}

torch::Tensor CausalConvLMImpl::forward(const torch::Tensor& ids) {
  auto x = embed_(ids).transpose(1, 2);                                       // [N, E, T]
  x = torch::nn::functional::pad(x, torch::nn::functional::PadFuncOptions({cfg_.context - 1, 0}));
  x = torch::tanh(conv_(x)).transpose(1, 2);                                  // [N, T, H]
  return out_(torch::tanh(hidden_(x)));
}

}  // namespace lm
