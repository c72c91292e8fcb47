// bench/gpu/transformer_lm_gpu.cpp after fabricize (written by hand exactly
// as the tool emits it: Fabric at the top of main, launch(), setup() after the
// optimizer, a Fabric data loader, no device moves, fabric.backward, rank-0
// output, and the fabric.autocast() scope before the forward that rule
// fabric-autocast writes). The precision comes from LT_PRECISION
// (Lightning's variable), e.g. LT_PRECISION=bf16-mixed.
//
//   lm_fabric [vocab dim heads layers seq batch steps warmup]
#include <fabric/fabric.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <vector>

#ifdef FABRIC_BENCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "../transformer_lm_model.h"

// Next-token prediction over a deterministic pseudo-text.
class TokenStream : public torch::data::datasets::Dataset<TokenStream> {
 public:
  TokenStream(int64_t vocab, int64_t seq_len, int64_t samples)
      : vocab_(vocab), seq_len_(seq_len), samples_(samples) {}

  torch::data::Example<> get(size_t index) override {
    auto pos = torch::arange(static_cast<int64_t>(index),
                             static_cast<int64_t>(index) + seq_len_ + 1);
    auto tokens = (pos * 7 + pos.div(3, "floor")) % vocab_;
    return {tokens.slice(0, 0, seq_len_), tokens.slice(0, 1, seq_len_ + 1)};
  }
  torch::optional<size_t> size() const override { return samples_; }

 private:
  int64_t vocab_, seq_len_, samples_;
};

int main(int argc, char** argv) {
  fabric::Fabric fabric(fabric::Options().accelerator("auto").devices("auto")
                            .strategy("ddp").precision("32-true"));
  fabric.launch();
  std::vector<int64_t> a{8192, 1024, 16, 8, 256, 32, 60, 10};  // defaults: GPU-sized
  for (int i = 1; i < argc && i <= static_cast<int>(a.size()); ++i) a[i - 1] = std::atoll(argv[i]);
  const int64_t vocab = a[0], dim = a[1], heads = a[2], layers = a[3], seq = a[4], batch = a[5];
  const int64_t steps = a[6], warmup = a[7];

  torch::manual_seed(0);

  auto dataset = TokenStream(vocab, seq, /*samples=*/batch * (steps + warmup))
                     .map(torch::data::transforms::Stack<>());
  auto dataloader = fabric.setup_dataloader<torch::data::samplers::SequentialSampler>(
      std::move(dataset), torch::data::DataLoaderOptions().batch_size(batch));

  TransformerLM model(vocab, dim, heads, layers);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01));
  fabric.setup(model, optimizer);

  model->train();
  int64_t step = 0;
  double last_loss = 0;
  auto start = std::chrono::steady_clock::now();
  while (step < steps + warmup) {
    for (auto& batch_data : *dataloader) {
      if (step == warmup) {
        if (fabric.device().is_cuda()) torch::cuda::synchronize();
        start = std::chrono::steady_clock::now();
      }
      auto input = batch_data.data;
      auto target = batch_data.target;
      optimizer.zero_grad();
      auto autocast = fabric.autocast();
      auto output = model->forward(input);
      auto loss = torch::nll_loss(output, target.view(-1));
      fabric.backward(loss);
      fabric.step(optimizer);
      if (++step == steps + warmup) {
        last_loss = loss.item<double>();  // waits for the GPU
        break;
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double peak_mib = 0;
#ifdef FABRIC_BENCH_CUDA
  if (fabric.device().is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(fabric.device().index());
    peak_mib = static_cast<double>(stats.allocated_bytes[0].peak) / (1024.0 * 1024.0);
  }
#endif
  fabric.print() << "RESULT program=fabric precision=" << fabric.options().precision()
                 << " device=" << fabric.device() << " steps=" << steps
                 << " seconds=" << seconds
                 << " steps_per_s=" << static_cast<double>(steps) / seconds
                 << " peak_mem_mib=" << peak_mib << " final_loss=" << last_loss << std::endl;
  return 0;
}
