// A tiny nanoGPT-style trainer: one token tensor made up front, random
// windows drawn with torch::randint at every step, a fixed number of steps,
// and a validation loss over a fixed set of windows at the end.
#include <torch/torch.h>

#include <cstdio>
#include <deque>
#include <numeric>
#include <tuple>
#include <vector>

constexpr int64_t kVocab = 24;

// Tokens from a random first-order Markov chain (peaked transition rows).
torch::Tensor make_tokens(int64_t n) {
  auto transition = torch::softmax(torch::randn({kVocab, kVocab}) * 2.5, 1);
  auto cumulative = transition.cumsum(1).contiguous();
  auto uniform = torch::rand({n}).contiguous();
  auto tokens = torch::empty({n}, torch::kLong);
  auto cum = cumulative.accessor<float, 2>();
  auto u = uniform.accessor<float, 1>();
  auto out = tokens.accessor<int64_t, 1>();
  int64_t current = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = current;
    int64_t next = 0;
    while (next < kVocab - 1 && cum[current][next] < u[i]) {
      ++next;
    }
    current = next;
  }
  return tokens;
}

std::tuple<torch::Tensor, torch::Tensor> get_batch(const torch::Tensor& data, int64_t block, int64_t batch) {
  auto ix = torch::randint(data.size(0) - block - 1, {batch}, torch::kLong);
  std::vector<torch::Tensor> xs, ys;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t i = ix[b].item<int64_t>();
    xs.push_back(data.slice(0, i, i + block));
    ys.push_back(data.slice(0, i + 1, i + block + 1));
  }
  return {torch::stack(xs), torch::stack(ys)};
}

struct TinyLMImpl : torch::nn::Module {
  TinyLMImpl(int64_t vocab, int64_t block, int64_t dim) {
    tok_emb = register_module("tok_emb", torch::nn::Embedding(vocab, dim));
    pos_emb = register_module("pos_emb", torch::nn::Embedding(block, dim));
    mlp = register_module("mlp", torch::nn::Linear(dim, dim));
    lm_head = register_module("lm_head", torch::nn::Linear(dim, vocab));
  }
  torch::Tensor forward(const torch::Tensor& idx) {
    auto pos = torch::arange(idx.size(1), idx.options());
    auto h = tok_emb->forward(idx) + pos_emb->forward(pos);
    h = h + torch::gelu(mlp->forward(h));
    return lm_head->forward(h);
  }
  torch::nn::Embedding tok_emb{nullptr}, pos_emb{nullptr};
  torch::nn::Linear mlp{nullptr}, lm_head{nullptr};
};
TORCH_MODULE(TinyLM);

torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}), targets.reshape({-1}));
}

int main() {
  torch::manual_seed(1337);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  const int64_t block_size = 32, batch_size = 16;
  const int max_steps = 500, log_interval = 50;

  auto data = make_tokens(24000);
  const int64_t n_train = 20000;
  auto train_tokens = data.slice(0, 0, n_train);
  auto val_tokens = data.slice(0, n_train);

  // Validation windows fixed before training: the first 64 consecutive blocks.
  std::vector<int64_t> val_offsets;
  for (int64_t k = 0; k < 64; ++k) {
    val_offsets.push_back(k * block_size);
  }

  TinyLM model(kVocab, block_size, 48);
  model->to(device);
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(3e-3).weight_decay(0.01));

  std::deque<double> recent;
  for (int step = 0; step < max_steps; ++step) {
    auto [x, y] = get_batch(train_tokens, block_size, batch_size);
    x = x.to(device);
    y = y.to(device);
    auto logits = model->forward(x);
    auto loss = lm_loss(logits, y);
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();

    recent.push_back(loss.item<double>());
    if (recent.size() > static_cast<size_t>(log_interval)) {
      recent.pop_front();
    }
    if ((step + 1) % log_interval == 0) {
      const double mean = std::accumulate(recent.begin(), recent.end(), 0.0) / recent.size();
      std::printf("step %d loss %.4f\n", step + 1, mean);
    }
  }

  torch::NoGradGuard no_grad;
  model->eval();
  double val_loss = 0;
  for (size_t k = 0; k < val_offsets.size(); ++k) {
    const int64_t o = val_offsets[k];
    auto x = val_tokens.slice(0, o, o + block_size).unsqueeze(0).to(device);
    auto y = val_tokens.slice(0, o + 1, o + block_size + 1).unsqueeze(0).to(device);
    val_loss += lm_loss(model->forward(x), y).item<double>();
  }
  std::printf("val loss %.4f\n", val_loss / val_offsets.size());
  return 0;
}
