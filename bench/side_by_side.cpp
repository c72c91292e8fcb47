// The C++ side of bench/lightning_side_by_side.py: one model trained for a
// few steps by one implementation, 2 CPU ranks on Gloo:
//
//   fabric_bench_side_by_side --model=mlp|lm|wide
//                             --impl=fabric-ddp|fabric-zero2|reducer|cxx-local|flat-allreduce
//                             [--devices=2] [--steps=30] [--warmup=5]
//
//   fabric-ddp    fabric.setup, fabric.backward, fabric.step (as fabricize emits)
//   fabric-zero2  the same with strategy "zero2"
//   reducer       the hand-written c10d::Reducer loop (bench/hand_reducer.h)
//   cxx-local     each rank trains alone (plain backward and step): the
//                 compute floor, without gradient synchronization
//   flat-allreduce  a plain backward, then one all-reduce of every gradient
//                 flattened into one buffer: synchronization without the
//                 Reducer and without overlap, for comparison
//
// The models, their initial weights, the data and the optimizer are those of
// lightning_side_by_side.py's Python worker, value for value: parameters
// are filled in registration order from seeded generators, and LibTorch's
// CPU generator draws the same numbers as PyTorch's of the same version.
// Rank 0 prints one line "RESULT {json}": the median and p90 step time and
// the median of its phases (forward, backward, optimizer; per step the
// slowest rank's), peak and base resident memory (the largest rank), and the
// first and last losses, which the driver compares with Python's.
#include <fabric/fabric.h>

#include "hand_reducer.h"
#include "transformer_lm_model.h"

#include <torch/version.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

namespace {

struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t in, int64_t hidden, int layers, int64_t out) {
    for (int i = 0; i < layers; ++i) {
      linears.push_back(register_module("linear" + std::to_string(i),
                                        torch::nn::Linear(i == 0 ? in : hidden, hidden)));
    }
    head = register_module("head", torch::nn::Linear(hidden, out));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& linear : linears) x = torch::relu(linear(x));
    return torch::log_softmax(head(x), 1);
  }
  std::vector<torch::nn::Linear> linears;
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Mlp);

// The sizes; lightning_side_by_side.py holds the same table.
struct ModelSpec {
  int64_t in = 0, hidden = 0, out = 10, batch = 0;
  int layers = 0;
  double lr = 0.01;
  bool language_model = false;
  int64_t vocab = 64, dim = 64, heads = 4, seq = 16;
};

ModelSpec spec_of(const std::string& name) {
  ModelSpec spec;
  if (name == "mlp") {
    spec.in = 128, spec.hidden = 512, spec.layers = 3, spec.batch = 64;
  } else if (name == "wide") {
    spec.in = 1024, spec.hidden = 4096, spec.layers = 2, spec.batch = 32;
  } else if (name == "lm") {
    spec.language_model = true, spec.layers = 2, spec.batch = 32, spec.lr = 0.1;
  } else {
    throw std::invalid_argument("--model must be mlp, lm or wide, not '" + name + "'");
  }
  return spec;
}

// Deterministic weights both languages reproduce: parameter i, in
// registration order, from manual_seed(1000 + i).
void fill_parameters(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  int64_t index = 0;
  for (auto& item : model.named_parameters()) {
    torch::manual_seed(1000 + index++);
    auto& parameter = item.value();
    const std::string& name = item.key();
    const bool norm_weight = name.find("norm") != std::string::npos &&
                             name.size() >= 6 && name.compare(name.size() - 6, 6, "weight") == 0;
    if (norm_weight) {
      parameter.uniform_(0.9, 1.1);
    } else {
      const double bound = parameter.dim() > 1 ? 1.0 / std::sqrt(double(parameter.size(-1))) : 0.05;
      parameter.uniform_(-bound, bound);
    }
  }
}

double resident_mib() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident * double(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

double peak_resident_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;  // KiB on Linux
}

std::string argument_value(int argc, char** argv, const std::string& name, std::string fallback) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    if (argument.rfind(prefix, 0) == 0) return argument.substr(prefix.size());
  }
  return fallback;
}

double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double position = q * (values.size() - 1);
  const auto below = static_cast<size_t>(std::floor(position));
  const auto above = std::min(below + 1, values.size() - 1);
  return values[below] + (position - below) * (values[above] - values[below]);
}

} // namespace

int main(int argc, char** argv) {
  const std::string model_name = argument_value(argc, argv, "model", "mlp");
  const std::string impl = argument_value(argc, argv, "impl", "fabric-ddp");
  const int devices = std::stoi(argument_value(argc, argv, "devices", "2"));
  const int steps = std::stoi(argument_value(argc, argv, "steps", "30"));
  const int warmup = std::stoi(argument_value(argc, argv, "warmup", "5"));
  if (impl != "fabric-ddp" && impl != "fabric-zero2" && impl != "reducer" && impl != "cxx-local" &&
      impl != "flat-allreduce") {
    std::fprintf(stderr,
                 "--impl must be fabric-ddp, fabric-zero2, reducer, cxx-local or flat-allreduce, not '%s'\n",
                 impl.c_str());
    return 2;
  }
  const ModelSpec spec = spec_of(model_name);

  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(devices).strategy(
      impl == "fabric-zero2" ? "zero2" : "ddp"));
  fabric.launch();
  torch::set_num_threads(1);  // 2 ranks on 2 cores; the Python worker does the same
  const double base_mib = resident_mib();

  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  if (spec.language_model) {
    TransformerLM model(spec.vocab, spec.dim, spec.heads, spec.layers);
    module = model.ptr();
    forward = [model](const torch::Tensor& x) mutable { return model->forward(x); };
  } else {
    Mlp model(spec.in, spec.hidden, spec.layers, spec.out);
    module = model.ptr();
    forward = [model](const torch::Tensor& x) mutable { return model->forward(x); };
  }
  fill_parameters(*module);
  int64_t parameter_count = 0;
  for (const auto& parameter : module->parameters()) parameter_count += parameter.numel();

  // Eight batches per rank, cycled.
  torch::manual_seed(fabric.global_rank() + 1);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> batches;
  for (int k = 0; k < 8; ++k) {
    if (spec.language_model) {
      const auto tokens = torch::randint(0, spec.vocab, {spec.batch, spec.seq + 1});
      batches.emplace_back(tokens.slice(1, 0, spec.seq), tokens.slice(1, 1, spec.seq + 1).reshape(-1));
    } else {
      auto input = torch::randn({spec.batch, spec.in});
      batches.emplace_back(input, torch::randint(0, spec.out, {spec.batch}));
    }
  }

  torch::optim::SGD optimizer(module->parameters(), spec.lr);
  std::unique_ptr<fabric_bench::HandReducer> reducer;
  const bool local = impl == "cxx-local";
  fabric::detail::c10d_compat::ProcessGroupPtr flat_group;
  if (impl == "flat-allreduce") flat_group = fabric_bench::own_group(fabric);
  const auto flat_all_reduce = [&] {
    std::vector<torch::Tensor> gradients;
    for (const auto& parameter : module->parameters()) gradients.push_back(parameter.grad().view(-1));
    std::vector<torch::Tensor> flat{torch::cat(gradients)};
    flat_group->allreduce(flat)->wait();
    flat[0].div_(fabric.world_size());
    int64_t offset = 0;
    for (auto& gradient : gradients) {
      gradient.copy_(flat[0].narrow(0, offset, gradient.numel()));
      offset += gradient.numel();
    }
  };
  if (impl == "reducer") {
    reducer = std::make_unique<fabric_bench::HandReducer>(fabric, module->parameters());
  } else if (!local && !flat_group) {
    fabric.setup(module, optimizer);
  }
  // A step in three timed phases: forward (with zero_grad and the loss),
  // backward (with the gradient all-reduce it overlaps), optimizer.
  using Clock = std::chrono::steady_clock;
  std::array<double, 3> phase{};
  const auto step = [&](int index) {
    const auto& [input, target] = batches[index % batches.size()];
    auto mark = Clock::now();
    const auto lap = [&](size_t which) {
      const auto now = Clock::now();
      phase[which] = std::chrono::duration<double>(now - mark).count();
      mark = now;
    };
    optimizer.zero_grad();
    if (reducer) reducer->before_forward();
    const auto loss = torch::nll_loss(forward(input), target);
    lap(0);
    if (reducer) {
      reducer->before_backward();
      loss.backward();
    } else if (local) {
      loss.backward();
    } else if (flat_group) {
      loss.backward();
      flat_all_reduce();
    } else {
      fabric.backward(loss);
    }
    lap(1);
    if (reducer || local || flat_group) {
      optimizer.step();
    } else {
      fabric.step(optimizer);
    }
    lap(2);
    return loss;
  };

  double first_loss = step(0).item<double>();
  for (int i = 1; i < warmup; ++i) step(i);
  fabric.barrier("timed steps");
  // The timed steps' window on CLOCK_MONOTONIC (steady_clock here), for
  // lightning_side_by_side.py --profile, which reads the scheduler's trace
  // of exactly these steps.
  const auto monotonic_seconds = [] {
    return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  };
  const double window_start = monotonic_seconds();
  std::array<std::vector<double>, 4> seconds;  // the whole step, then the phases
  double last_loss = 0;
  for (int i = warmup; i < warmup + steps; ++i) {
    const auto loss = step(i);
    seconds[0].push_back(phase[0] + phase[1] + phase[2]);
    for (size_t p = 0; p < 3; ++p) seconds[p + 1].push_back(phase[p]);
    if (i == warmup + steps - 1) last_loss = loss.item<double>();
  }
  const double window_end = monotonic_seconds();

  // Per step, the slowest rank's time: the step ends when every rank's does.
  std::array<std::vector<double>, 4> slowest_ms;
  for (size_t k = 0; k < seconds.size(); ++k) {
    const auto gathered = fabric.all_gather(torch::tensor(seconds[k], torch::kDouble));
    auto slowest = gathered.front().clone();
    for (const auto& rank_seconds : gathered) slowest = torch::maximum(slowest, rank_seconds);
    for (int64_t i = 0; i < slowest.numel(); ++i) slowest_ms[k].push_back(1e3 * slowest[i].item<double>());
  }
  const double peak_mib =
      fabric.all_reduce(torch::tensor(peak_resident_mib(), torch::kDouble), fabric::ReduceOp::Max)
          .item<double>();
  const double largest_base_mib =
      fabric.all_reduce(torch::tensor(base_mib, torch::kDouble), fabric::ReduceOp::Max).item<double>();
  fabric.printf(
      "RESULT {\"impl\": \"%s\", \"model\": \"%s\", \"torch\": \"%s\", \"ranks\": %d, "
      "\"threads\": %d, \"parameters\": %lld, \"steps\": %d, \"median_ms\": %.4f, "
      "\"p90_ms\": %.4f, \"forward_ms\": %.4f, \"backward_ms\": %.4f, \"optimizer_ms\": %.4f, "
      "\"peak_rss_mib\": %.1f, \"base_rss_mib\": %.1f, \"first_loss\": %.8g, \"last_loss\": %.8g, "
      "\"window_start\": %.6f, \"window_end\": %.6f}\n",
      impl.c_str(), model_name.c_str(), TORCH_VERSION, fabric.world_size(), torch::get_num_threads(),
      static_cast<long long>(parameter_count), steps, quantile(slowest_ms[0], 0.5),
      quantile(slowest_ms[0], 0.9), quantile(slowest_ms[1], 0.5), quantile(slowest_ms[2], 0.5),
      quantile(slowest_ms[3], 0.5), peak_mib, largest_base_mib, first_loss, last_loss, window_start, window_end);
  return 0;
}
