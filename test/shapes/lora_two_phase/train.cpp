// A tiny GPT on a synthetic "arithmetic progression" language, trained in
// two phases: first low-rank adapters only (LoRA on the attention and MLP
// projections, everything else frozen), then every parameter with a second
// optimizer at a lower learning rate.
//
// Each sequence starts with a task token that names the step k; every token
// after the first is the previous one plus k modulo the vocabulary, or, one
// time in ten, a random token (the count goes on from there).
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace nn = torch::nn;

constexpr int64_t kVocab = 16;      // ordinary tokens 0..15
constexpr int64_t kTasks = 4;       // task tokens 16..19
constexpr int64_t kSeqLen = 12;     // tokens per training sequence (input side)
constexpr int64_t kModel = 32;
constexpr int64_t kHeads = 2;
constexpr int64_t kIgnore = -100;   // nll_loss's default ignore_index

// ---------------------------------------------------------------------------
// LoRA: y = W x + (alpha / r) * B A x, with A (r x in) random and B (out x r)
// zero, so the adapted layer starts out as the base layer.
struct LoRALinearImpl : nn::Module {
  LoRALinearImpl(int64_t in, int64_t out, int64_t rank, double alpha)
      : base(register_module("base", nn::Linear(in, out))), scale(alpha / static_cast<double>(rank)) {
    lora_A = register_parameter("lora_A", torch::randn({rank, in}) / std::sqrt(static_cast<double>(in)));
    lora_B = register_parameter("lora_B", torch::zeros({out, rank}));
  }

  torch::Tensor forward(const torch::Tensor& x) {
    return base(x) + scale * torch::matmul(torch::matmul(x, lora_A.t()), lora_B.t());
  }

  nn::Linear base;
  torch::Tensor lora_A, lora_B;
  double scale;
};
TORCH_MODULE(LoRALinear);

struct BlockImpl : nn::Module {
  BlockImpl(int64_t d, int64_t heads, int64_t rank)
      : ln1(register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({d})))),
        ln2(register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({d})))),
        q(register_module("q", LoRALinear(d, d, rank, 2.0 * rank))),
        k(register_module("k", nn::Linear(d, d))),
        v(register_module("v", LoRALinear(d, d, rank, 2.0 * rank))),
        proj(register_module("proj", nn::Linear(d, d))),
        fc1(register_module("fc1", LoRALinear(d, 4 * d, rank, 2.0 * rank))),
        fc2(register_module("fc2", nn::Linear(4 * d, d))),
        n_heads(heads) {}

  torch::Tensor forward(torch::Tensor x, const torch::Tensor& causal) {
    const auto B = x.size(0), T = x.size(1), C = x.size(2);
    const auto hd = C / n_heads;
    auto h = ln1(x);
    auto split = [&](const torch::Tensor& t) { return t.view({B, T, n_heads, hd}).transpose(1, 2); };
    auto qh = split(q(h)), kh = split(k(h)), vh = split(v(h));
    auto att = torch::matmul(qh, kh.transpose(-2, -1)) / std::sqrt(static_cast<double>(hd));
    att = att.masked_fill(causal.slice(0, 0, T).slice(1, 0, T), -1e9);
    auto y = torch::matmul(torch::softmax(att, -1), vh).transpose(1, 2).contiguous().view({B, T, C});
    x = x + proj(y);
    x = x + fc2(torch::gelu(fc1(ln2(x))));
    return x;
  }

  nn::LayerNorm ln1, ln2;
  LoRALinear q;
  nn::Linear k;
  LoRALinear v;
  nn::Linear proj;
  LoRALinear fc1;
  nn::Linear fc2;
  int64_t n_heads;
};
TORCH_MODULE(Block);

struct TinyGPTImpl : nn::Module {
  TinyGPTImpl(int64_t vocab, int64_t block_size, int64_t d, int64_t heads, int64_t layers, int64_t rank)
      : tok(register_module("tok", nn::Embedding(vocab, d))),
        ln_f(register_module("ln_f", nn::LayerNorm(nn::LayerNormOptions({d})))),
        head(register_module("head", nn::Linear(d, vocab))) {
    pos = register_parameter("pos", torch::randn({block_size, d}) * 0.02);
    blocks = register_module("blocks", nn::ModuleList());
    for (int64_t i = 0; i < layers; ++i) blocks->push_back(Block(d, heads, rank));
    causal = register_buffer("causal", torch::ones({block_size, block_size}, torch::kBool).triu(1));
  }

  // tokens: (B, T) int64 -> logits (B, T, vocab)
  torch::Tensor forward(const torch::Tensor& tokens) {
    const auto T = tokens.size(1);
    auto x = tok(tokens) + pos.slice(0, 0, T);
    for (const auto& m : *blocks) x = m->as<Block>()->forward(x, causal);
    return head(ln_f(x));
  }

  nn::Embedding tok;
  nn::LayerNorm ln_f;
  nn::Linear head;
  nn::ModuleList blocks;
  torch::Tensor pos, causal;
};
TORCH_MODULE(TinyGPT);

// ---------------------------------------------------------------------------
class ProgressionDataset : public torch::data::datasets::Dataset<ProgressionDataset> {
 public:
  explicit ProgressionDataset(int64_t n) {
    const int64_t steps[kTasks] = {1, 3, 5, 7};
    auto task = torch::randint(0, kTasks, {n});
    auto start = torch::randint(0, kVocab, {n});
    auto noise = torch::rand({n, kSeqLen}) < 0.1;
    auto random_tokens = torch::randint(0, kVocab, {n, kSeqLen});
    auto seq = torch::empty({n, kSeqLen + 1}, torch::kLong);
    auto s = seq.accessor<int64_t, 2>();
    auto ta = task.accessor<int64_t, 1>();
    auto st = start.accessor<int64_t, 1>();
    auto na = noise.accessor<bool, 2>();
    auto ra = random_tokens.accessor<int64_t, 2>();
    for (int64_t i = 0; i < n; ++i) {
      s[i][0] = kVocab + ta[i];
      s[i][1] = st[i];
      for (int64_t t = 2; t <= kSeqLen; ++t) {
        s[i][t] = na[i][t - 1] ? ra[i][t - 1] : (s[i][t - 1] + steps[ta[i]]) % kVocab;
      }
    }
    inputs_ = seq.slice(1, 0, kSeqLen);
    targets_ = seq.slice(1, 1, kSeqLen + 1).clone();
    // The first token after the task token is random: nothing to learn there.
    targets_.select(1, 0).fill_(kIgnore);
  }

  torch::data::Example<> get(size_t i) override { return {inputs_[i], targets_[i]}; }
  torch::optional<size_t> size() const override { return inputs_.size(0); }

 private:
  torch::Tensor inputs_, targets_;
};

struct Stats {
  double loss = 0.0;
  double acc = 0.0;
};

template <typename Loader>
Stats run_epoch(TinyGPT& model, Loader& loader, torch::optim::Optimizer& optimizer, torch::Device device) {
  model->train();
  double loss_sum = 0.0;
  int64_t batches = 0, hits = 0, counted = 0;
  for (auto& batch : loader) {
    auto tokens = batch.data.to(device);
    auto targets = batch.target.to(device);
    optimizer.zero_grad();
    auto logits = model->forward(tokens);
    auto loss = torch::nll_loss(torch::log_softmax(logits, -1).view({-1, logits.size(-1)}), targets.view({-1}));
    loss.backward();
    nn::utils::clip_grad_norm_(model->parameters(), 1.0);
    optimizer.step();
    loss_sum += loss.template item<double>();
    ++batches;
    auto valid = targets.ne(kIgnore);
    hits += logits.argmax(-1).eq(targets).logical_and(valid).sum().template item<int64_t>();
    counted += valid.sum().template item<int64_t>();
  }
  return {loss_sum / batches, static_cast<double>(hits) / counted};
}

int64_t count_trainable(TinyGPT& model) {
  int64_t n = 0;
  for (const auto& p : model->parameters()) {
    if (p.requires_grad()) n += p.numel();
  }
  return n;
}

int main() {
  torch::manual_seed(1234);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);

  const int lora_epochs = 4;
  const int full_epochs = 4;
  const int64_t batch_size = 32;

  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      ProgressionDataset(1024).map(torch::data::transforms::Stack<>()), batch_size);
  auto test_set = ProgressionDataset(256).map(torch::data::transforms::Stack<>());
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(test_set), 128);

  TinyGPT model(kVocab + kTasks, kSeqLen, kModel, kHeads, /*layers=*/2, /*rank=*/4);
  model->to(device);
  const int64_t total_params = count_trainable(model);

  // ---- phase 1: adapters only -------------------------------------------
  std::vector<torch::Tensor> adapter_params;
  for (auto& named : model->named_parameters()) {
    const bool is_adapter = named.key().find("lora_") != std::string::npos;
    named.value().requires_grad_(is_adapter);
    if (is_adapter) adapter_params.push_back(named.value());
  }
  std::printf("phase 1: lora adapters, %lld of %lld parameters trainable\n",
              static_cast<long long>(count_trainable(model)), static_cast<long long>(total_params));
  torch::optim::AdamW lora_opt(adapter_params, torch::optim::AdamWOptions(1e-2).weight_decay(0.0));

  int epoch = 0;
  for (int e = 0; e < lora_epochs; ++e) {
    Stats s = run_epoch(model, *train_loader, lora_opt, device);
    std::printf("epoch %d loss %.4f acc %.4f (lora)\n", ++epoch, s.loss, s.acc);
  }

  // ---- phase 2: full fine-tuning ------------------------------------------
  for (auto& p : model->parameters()) p.requires_grad_(true);
  std::printf("phase 2: full fine-tuning, %lld parameters trainable\n",
              static_cast<long long>(count_trainable(model)));
  torch::optim::AdamW full_opt(model->parameters(), torch::optim::AdamWOptions(3e-3).weight_decay(0.01));
  for (int e = 0; e < full_epochs; ++e) {
    Stats s = run_epoch(model, *train_loader, full_opt, device);
    std::printf("epoch %d loss %.4f acc %.4f (full)\n", ++epoch, s.loss, s.acc);
  }

  // ---- evaluation ----------------------------------------------------------
  model->eval();
  torch::NoGradGuard no_grad;
  double loss_sum = 0.0;
  int64_t hits = 0, counted = 0;
  for (const auto& batch : *test_loader) {
    auto tokens = batch.data.to(device);
    auto targets = batch.target.to(device);
    auto logits = model->forward(tokens);
    loss_sum += torch::nll_loss(torch::log_softmax(logits, -1).view({-1, logits.size(-1)}), targets.view({-1}),
                                {}, torch::Reduction::Sum)
                    .item<double>();
    auto valid = targets.ne(kIgnore);
    hits += logits.argmax(-1).eq(targets).logical_and(valid).sum().item<int64_t>();
    counted += valid.sum().item<int64_t>();
  }
  std::printf("test loss %.4f acc %.4f\n", loss_sum / counted, static_cast<double>(hits) / counted);
  return 0;
}
