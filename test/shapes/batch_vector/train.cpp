// A next-character model on a synthetic character stream. The stream is cut
// once, before training, into a std::vector of (input window, target window)
// batches; each epoch shuffles that vector with a std::mt19937 and trains
// over it with a range-for.
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <utility>
#include <vector>

constexpr int64_t kVocab = 16;

// A Markov chain over kVocab symbols: mostly one successor, sometimes
// another, sometimes anything (so the best possible loss is about 1.2).
std::vector<int64_t> make_stream(size_t length, std::mt19937& gen) {
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::uniform_int_distribution<int64_t> any(0, kVocab - 1);
  std::vector<int64_t> stream(length);
  int64_t c = 0;
  for (size_t i = 0; i < length; ++i) {
    stream[i] = c;
    const double u = coin(gen);
    if (u < 0.6) {
      c = (c * 5 + 1) % kVocab;
    } else if (u < 0.85) {
      c = (c + 3) % kVocab;
    } else {
      c = any(gen);
    }
  }
  return stream;
}

// Consecutive windows of `seq_len` characters, `windows_per_batch` to a batch;
// the target is the input shifted by one character.
std::vector<std::pair<torch::Tensor, torch::Tensor>> make_batches(const std::vector<int64_t>& stream,
                                                                  int64_t seq_len,
                                                                  int64_t windows_per_batch) {
  auto ids = torch::tensor(stream, torch::kLong);
  const int64_t windows = (ids.size(0) - 1) / seq_len;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> batches;
  for (int64_t w = 0; w + windows_per_batch <= windows; w += windows_per_batch) {
    std::vector<torch::Tensor> inputs, targets;
    for (int64_t k = 0; k < windows_per_batch; ++k) {
      const int64_t start = (w + k) * seq_len;
      inputs.push_back(ids.slice(0, start, start + seq_len));
      targets.push_back(ids.slice(0, start + 1, start + seq_len + 1));
    }
    batches.emplace_back(torch::stack(inputs), torch::stack(targets));
  }
  return batches;
}

struct CharModelImpl : torch::nn::Module {
  CharModelImpl(int64_t vocab, int64_t dim) {
    embed = register_module("embed", torch::nn::Embedding(vocab, dim));
    hidden = register_module("hidden", torch::nn::Linear(dim, dim));
    head = register_module("head", torch::nn::Linear(dim, vocab));
  }
  torch::Tensor forward(const torch::Tensor& ids) {
    auto h = embed->forward(ids);
    h = torch::relu(hidden->forward(h));
    return head->forward(h);  // [B, T, vocab]
  }
  torch::nn::Embedding embed{nullptr};
  torch::nn::Linear hidden{nullptr}, head{nullptr};
};
TORCH_MODULE(CharModel);

torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& target) {
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), target.reshape({-1}));
}

int main() {
  torch::manual_seed(3);
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;

  const int64_t seq_len = 32, windows_per_batch = 16;
  std::mt19937 data_gen(99);
  auto train_stream = make_stream(32 * windows_per_batch * seq_len + 1, data_gen);
  auto val_stream = make_stream(8 * windows_per_batch * seq_len + 1, data_gen);
  auto train_batches = make_batches(train_stream, seq_len, windows_per_batch);
  auto val_batches = make_batches(val_stream, seq_len, windows_per_batch);
  std::printf("train batches %zu val batches %zu\n", train_batches.size(), val_batches.size());

  CharModel model(kVocab, 32);
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
  std::mt19937 rng(1234);

  for (int epoch = 1; epoch <= 6; ++epoch) {
    model->train();
    std::shuffle(train_batches.begin(), train_batches.end(), rng);
    double train_loss = 0;
    int steps = 0;
    for (auto& batch : train_batches) {
      auto input = batch.first.to(device);
      auto target = batch.second.to(device);
      optimizer.zero_grad();
      auto loss = lm_loss(model->forward(input), target);
      loss.backward();
      optimizer.step();
      train_loss += loss.item<double>();
      ++steps;
    }

    model->eval();
    torch::NoGradGuard no_grad;
    double val_loss = 0;
    int val_count = 0;
    for (size_t i = 0; i < val_batches.size(); ++i) {
      auto input = val_batches[i].first.to(device);
      auto target = val_batches[i].second.to(device);
      val_loss += lm_loss(model->forward(input), target).item<double>();
      ++val_count;
    }
    std::printf("epoch %d loss %.4f val_loss %.4f\n", epoch, train_loss / steps, val_loss / val_count);
  }

  // Next-character accuracy on the validation windows.
  torch::NoGradGuard no_grad;
  model->eval();
  double loss_sum = 0;
  int64_t hits = 0, tokens = 0;
  for (const auto& batch : val_batches) {
    auto input = batch.first.to(device);
    auto target = batch.second.to(device);
    auto logits = model->forward(input);
    loss_sum += lm_loss(logits, target).item<double>() * target.numel();
    hits += logits.argmax(-1).eq(target).sum().item<int64_t>();
    tokens += target.numel();
  }
  std::printf("test loss %.4f acc %.4f\n", loss_sum / tokens, static_cast<double>(hits) / tokens);
  return 0;
}
