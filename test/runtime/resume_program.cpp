// Exact resume (issue 27 point 5). Trains with dropout, a shuffled loader
// over a data set no rank count divides, SGD with momentum and a StepLR
// schedule, and saves a fabric::State after every optimizer step. Killed
// at any step and started again with --resume, it must end with the same
// parameters, bit for bit, as a run that was never interrupted
// (test/runtime/kill_resume.py drives it).
//
//   fabric_resume_program --devices=N --checkpoint=PATH [--resume] [--omit=rng|loader|scheduler|plateau|generator]
//
// On LibTorch 2.x a ReduceLROnPlateauScheduler also halves the learning
// rate when the epoch's loss (reduced over the ranks) stalls; it prints
// "plateau scheduler" first then.
//
// Prints "step <k>" after each save, and "final <hash of the parameters>"
// at the end. --omit leaves one entry out of the State, to show that the
// test notices what it is for.
#include <fabric/fabric.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>

namespace {

struct Points : torch::data::datasets::Dataset<Points> {
  Points(torch::Tensor x, torch::Tensor y) : x(std::move(x)), y(std::move(y)) {}
  torch::data::Example<> get(size_t index) override { return {x[index], y[index]}; }
  torch::optional<size_t> size() const override { return static_cast<size_t>(x.size(0)); }
  torch::Tensor x, y;
};

struct NetImpl : torch::nn::Module {
  NetImpl() {
    hidden = register_module("hidden", torch::nn::Linear(6, 16));
    dropout = register_module("dropout", torch::nn::Dropout(0.3));
    out = register_module("out", torch::nn::Linear(16, 1));
  }
  torch::Tensor forward(torch::Tensor x) { return out(dropout(torch::relu(hidden(x)))); }
  torch::nn::Linear hidden{nullptr}, out{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(Net);

// FNV-1a over the parameters' bytes.
uint64_t hash_of(torch::nn::Module& module) {
  uint64_t hash = 1469598103934665603ull;
  for (const auto& parameter : module.parameters()) {
    const auto data = parameter.detach().cpu().contiguous();
    const auto* bytes = static_cast<const unsigned char*>(data.data_ptr());
    for (size_t i = 0; i < static_cast<size_t>(data.numel()) * data.element_size(); ++i) {
      hash = (hash ^ bytes[i]) * 1099511628211ull;
    }
  }
  return hash;
}

} // namespace

int main(int argc, char** argv) {
  int devices = 1;
  std::string checkpoint, omit;
  bool resume = false;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    const auto value = argument.substr(argument.find('=') + 1);
    if (argument.rfind("--devices=", 0) == 0) devices = std::stoi(value);
    if (argument.rfind("--checkpoint=", 0) == 0) checkpoint = value;
    if (argument.rfind("--omit=", 0) == 0) omit = value;
    if (argument == "--resume") resume = true;
  }
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(devices));
  fabric.launch();
  fabric.print() << "strategy " << fabric.options().strategy() << std::endl;
  torch::manual_seed(5);
  const auto x = torch::randn({203, 6});
  const auto y = x.sum(1, true).sin() + 0.1 * torch::randn({203, 1});
  auto loader = fabric.setup_dataloader<torch::data::samplers::RandomSampler>(
      Points(x, y).map(torch::data::transforms::Stack<>()), 8);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/2, /*gamma=*/0.5);
  fabric.setup(model, optimizer);

  int64_t epoch = 0, step = 0;
  double epoch_loss = 0;  // this rank's, over the epoch so far
  int64_t epoch_batches = 0;
  fabric::State state{{"model", model},         {"optimizer", optimizer},        {"epoch", epoch},
                      {"step", step},           {"epoch_loss", epoch_loss}, {"epoch_batches", epoch_batches}};
  if (omit != "scheduler") state.add({"scheduler", scheduler});
#ifdef FABRIC_HAS_PLATEAU_SCHEDULER
  // A large threshold: every epoch counts as no better, so the rate drops
  // once the patience of one epoch is spent (at epochs 2 and 4).
  torch::optim::ReduceLROnPlateauScheduler plateau(optimizer, torch::optim::ReduceLROnPlateauScheduler::min,
                                                   /*factor=*/0.7, /*patience=*/1, /*threshold=*/0.5);
  fabric.print() << "plateau scheduler" << std::endl;
  if (omit != "plateau") state.add({"plateau", plateau});
#endif
  if (omit != "loader") state.add({"loader", *loader});
  if (omit != "rng") state.add({"rng", fabric::RandomState()});
  // The program's own generator, seeded differently on every rank: a
  // jitter of the inputs.
  std::mt19937 jitter_engine(1234 + static_cast<unsigned>(fabric.global_rank()));
  if (omit != "generator") state.add({"generator", jitter_engine});
  if (resume) fabric.load(checkpoint, state);

  for (; epoch < 4; ++epoch) {
    for (auto& batch : *loader) {
      optimizer.zero_grad();
      const float jitter = std::uniform_real_distribution<float>(-0.05f, 0.05f)(jitter_engine);
      const auto loss = torch::mse_loss(model->forward(batch.data * (1 + jitter)), batch.target);
      fabric.backward(loss);
      fabric.step(optimizer);
      epoch_loss += loss.item<double>();
      ++epoch_batches;
      ++step;
      fabric.save(checkpoint, state);
      fabric.print() << "step " << step << std::endl;
    }
    scheduler.step();
    const double mean =
        fabric.all_reduce(torch::tensor(epoch_loss / std::max<int64_t>(1, epoch_batches), torch::kDouble),
                          fabric::ReduceOp::Mean)
            .item<double>();
#ifdef FABRIC_HAS_PLATEAU_SCHEDULER
    plateau.step(static_cast<float>(mean));
#endif
    (void)mean;
    epoch_loss = 0;
    epoch_batches = 0;
  }
  char hash[32];
  std::snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(hash_of(*model)));
  fabric.print() << "final " << hash << " steps " << step << std::endl;
  return 0;
}
