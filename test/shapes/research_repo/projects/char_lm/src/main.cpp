// Character-level language model on a synthetic token stream.
//   ./char_lm [key=value ...]
#include <cmath>
#include <iostream>

#include <torch/torch.h>

#include "corpus.h"
#include "model.h"
#include "utils/config.h"
#include "utils/logging.h"
#include "utils/metrics.h"

namespace F = torch::nn::functional;

int main(int argc, char** argv) {
  torch::manual_seed(11);

  utils::Config cfg({{"vocab", "16"},
                     {"seq_len", "32"},
                     {"batch_size", "16"},
                     {"epochs", "4"},
                     {"lr", "5e-3"},
                     {"train_tokens", "16385"},
                     {"test_tokens", "4097"},
                     {"p_next", "0.9"}});
  cfg.parse_args(argc, argv);
  const int64_t vocab = cfg.get_int("vocab");
  const int64_t seq_len = cfg.get_int("seq_len");

  torch::Device device = torch::kCPU;
  if (torch::cuda::is_available()) {
    device = torch::Device(torch::kCUDA, 0);
  }

  // "Tokenize" once: the corpora go to disk, the data sets read them back.
  const auto successor = torch::randperm(vocab, torch::kLong);
  lm::write_synthetic_corpus("train_tokens.pt", cfg.get_int("train_tokens"), vocab, cfg.get_float("p_next"),
                             successor);
  lm::write_synthetic_corpus("test_tokens.pt", cfg.get_int("test_tokens"), vocab, cfg.get_float("p_next"),
                             successor);

  lm::TokenWindows train_windows("train_tokens.pt", seq_len, seq_len);
  const auto train_windows_count = train_windows.size().value();
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      train_windows.map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(cfg.get_int("batch_size")));

  lm::LMConfig model_cfg;
  model_cfg.vocab = vocab;
  lm::CausalConvLM model(model_cfg);
  model->to(device);
  torch::optim::AdamW optimizer(model->parameters(),
                                torch::optim::AdamWOptions(cfg.get_float("lr")).weight_decay(1e-4));

  utils::CsvLogger log("lm_train.csv", {"epoch", "loss", "ppl", "acc"});
  std::cout << "train windows " << train_windows_count << " of " << seq_len << " tokens" << std::endl;

  for (int epoch = 1; epoch <= cfg.get_int("epochs"); ++epoch) {
    model->train();
    utils::AverageMeter loss_meter;
    int64_t hits = 0, tokens = 0;
    for (auto& batch : *train_loader) {
      auto ids = batch.data.to(device);
      auto targets = batch.target.to(device);
      auto logits = model->forward(ids);
      auto loss = F::cross_entropy(logits.reshape({-1, vocab}), targets.reshape({-1}));

      optimizer.zero_grad();
      loss.backward();
      optimizer.step();

      loss_meter.update(loss.item<double>(), targets.numel());
      hits += utils::correct(logits.detach(), targets);
      tokens += targets.numel();
    }
    const double acc = static_cast<double>(hits) / tokens;
    std::cout << "epoch " << epoch << " loss " << utils::fmt(loss_meter.avg()) << " ppl "
              << utils::fmt(std::exp(loss_meter.avg()), 3) << " acc " << utils::fmt(acc) << std::endl;
    log.write({static_cast<double>(epoch), loss_meter.avg(), std::exp(loss_meter.avg()), acc});
  }

  // Held-out perplexity: every next-token prediction of the test stream.
  torch::NoGradGuard no_grad;
  model->eval();
  torch::Tensor ids;
  torch::load(ids, "test_tokens.pt");
  double nll = 0;
  int64_t hits = 0, count = 0;
  for (int64_t i = 0; i + seq_len < ids.size(1); i += seq_len) {
    auto input = ids.slice(1, i, i + seq_len).to(device);
    auto target = ids.slice(1, i + 1, i + seq_len + 1).to(device);
    auto logits = model->forward(input);
    nll += F::cross_entropy(logits.reshape({-1, vocab}), target.reshape({-1}),
                            F::CrossEntropyFuncOptions().reduction(torch::kSum))
               .item<double>();
    hits += utils::correct(logits, target);
    count += target.numel();
  }
  std::cout << "test loss " << utils::fmt(nll / count) << " acc " << utils::fmt(hits / double(count))
            << " ppl " << utils::fmt(std::exp(nll / count), 3) << std::endl;
  return 0;
}
