// The transformer language model of ../shared/corpus/transformer_lm, shared
// by the benchmarks that train it (side_by_side.cpp on CPU, and the GPU pair
// gpu/transformer_lm_gpu.cpp, before fabricize, and gpu/lm_fabric.cpp,
// after it), so that all of them train the same model.
#pragma once

#include <torch/torch.h>

#include <cstdint>

struct TransformerLMImpl : torch::nn::Module {
  TransformerLMImpl(int64_t vocab, int64_t dim, int64_t heads, int64_t layers)
      : embed(register_module("embed", torch::nn::Embedding(vocab, dim))),
        encoder(register_module(
            "encoder", torch::nn::TransformerEncoder(torch::nn::TransformerEncoderOptions(
                           torch::nn::TransformerEncoderLayerOptions(dim, heads)
                               .dim_feedforward(4 * dim)
                               .dropout(0.0),
                           layers)))),
        head(register_module("head", torch::nn::Linear(dim, vocab))) {}

  // tokens: [batch, seq] -> log-probabilities [batch * seq, vocab]
  torch::Tensor forward(const torch::Tensor& tokens) {
    auto x = embed(tokens).transpose(0, 1);  // [seq, batch, dim]
    x = encoder(x).transpose(0, 1);
    return torch::log_softmax(head(x), -1).flatten(0, 1);
  }

  torch::nn::Embedding embed;
  torch::nn::TransformerEncoder encoder;
  torch::nn::Linear head;
};
TORCH_MODULE(TransformerLM);
