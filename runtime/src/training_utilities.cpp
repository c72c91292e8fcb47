// Logging through the configured loggers (rank 0 only), the free
// rank_zero_ofstream, no_backward_sync, rank_zero_first, seed_everything and
// one default generator seed for the ranks of an unseeded program.
#include <fabric/fabric.h>

#include "cluster_environment.h"
#include "fabric_state.h"

#include <ATen/CPUGeneratorImpl.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace fabric {

// ---- loggers -------------------------------------------------------------------

std::ofstream rank_zero_ofstream(const std::string& path, std::ios::openmode mode) {
  return detail::open_rank_zero_ofstream(detail::global_zero_from_environment(), path, mode);
}

void Fabric::log(const std::string& name, double value, int64_t step) { log_dict(Metrics{{name, value}}, step); }

void Fabric::log_dict(const Metrics& metrics, int64_t step) {
  const int64_t call = state_->log_calls++;
  if (!is_global_zero()) return;
  for (const auto& logger : state_->options.loggers()) {
    logger->log_metrics(metrics, step < 0 ? call : step);
  }
}

const std::vector<std::shared_ptr<Logger>>& Fabric::loggers() const { return state_->options.loggers(); }

// ---- training utilities ------------------------------------------------------

detail::FabricState* Fabric::checked_state_for_no_sync(const torch::nn::Module* module) {
  if (state_->find_model(module) == nullptr) {
    throw std::logic_error(
        "fabric::no_backward_sync: the model was not set up; call fabric.setup(model, ...) "
        "first");
  }
  return state_.get();
}

NoBackwardSync::NoBackwardSync(detail::FabricState* state, const torch::nn::Module* module, bool enabled)
    : state_(state), module_(module), enabled_(enabled) {
  if (enabled_) ++state_->find_model(module_)->no_sync_depth;
}

NoBackwardSync::~NoBackwardSync() {
  // The model's entry is gone only if another model was set up at its
  // address while the guard lived.
  if (!enabled_) return;
  if (auto* model = state_->find_model(module_)) --model->no_sync_depth;
}

torch::Tensor Fabric::clip_module_gradients(torch::nn::Module& module, torch::optim::Optimizer& /*optimizer*/,
                                            c10::optional<double> clip_val, c10::optional<double> max_norm,
                                            double norm_type, bool error_if_nonfinite) {
  if (clip_val.has_value() == max_norm.has_value()) {
    throw std::invalid_argument("fabric::clip_gradients: pass exactly one of clip_val and max_norm");
  }
  std::vector<torch::Tensor> gradients;
  for (const auto& parameter : module.parameters()) {
    if (parameter.grad().defined()) gradients.push_back(parameter.grad());
  }
  // Under zero2 each rank holds only its own parameters' gradients: the
  // total norm combines the ranks' partial ones (every rank takes part, also
  // one that owns no gradient).
  const bool sharded = state_->strategy->shards_gradients();
  if (gradients.empty() && !sharded) {
    return torch::zeros({}, torch::TensorOptions().device(state_->device));
  }
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> norms;
  for (const auto& gradient : gradients) {
    norms.push_back(gradient.detach().norm(norm_type).to(torch::kFloat));
  }
  torch::Tensor total;
  if (!sharded) {
    total = std::isinf(norm_type) ? torch::stack(norms).max() : torch::stack(norms).norm(norm_type);
  } else if (std::isinf(norm_type)) {
    const auto local =
        norms.empty() ? torch::zeros({}, torch::TensorOptions().device(state_->device)) : torch::stack(norms).max();
    total = all_reduce(local, ReduceOp::Max);
  } else {
    const auto local = norms.empty() ? torch::zeros({}, torch::TensorOptions().device(state_->device))
                                     : torch::stack(norms).pow(norm_type).sum();
    total = all_reduce(local, ReduceOp::Sum).pow(1.0 / norm_type);
  }
  if (error_if_nonfinite && !std::isfinite(total.item<double>())) {
    throw std::runtime_error("fabric::clip_gradients: the total norm of the gradients is " +
                             std::to_string(total.item<double>()) + "; pass error_if_nonfinite = false to clip anyway");
  }
  if (max_norm) {
    // As torch.nn.utils.clip_grad_norm_: scaled only when above max_norm.
    const auto coefficient = (*max_norm / (total + 1e-6)).clamp_max(1.0);
    for (auto& gradient : gradients) gradient.mul_(coefficient.to(gradient.dtype()));
  } else {
    for (auto& gradient : gradients) gradient.clamp_(-*clip_val, *clip_val);
  }
  return total;
}

RankZeroFirst Fabric::rank_zero_first(bool local) {
  return RankZeroFirst(*this, local ? local_rank() == 0 : is_global_zero());
}

RankZeroFirst::RankZeroFirst(Fabric& fabric, bool first)
    : fabric_(fabric), first_(first), uncaught_exceptions_(std::uncaught_exceptions()) {
  // The others wait here until the first ones leave their scope.
  if (!first_) fabric_.barrier("fabric.rank_zero_first");
}

RankZeroFirst::~RankZeroFirst() noexcept(false) {
  // A first rank that leaves by an exception does not release the others;
  // the launcher stops the job when that exception ends the process.
  if (first_ && std::uncaught_exceptions() == uncaught_exceptions_) {
    fabric_.barrier("fabric.rank_zero_first");
  }
}

namespace detail {
namespace {

// LibTorch's default CPU generator as this library found it when it was
// loaded, before main: Debian's LibTorch seeds it from /dev/urandom in every
// process, so its seed differs between ranks until a program seeds it.
struct DefaultGeneratorAtLoad {
  uint64_t seed = 0;
  torch::Tensor state;
  DefaultGeneratorAtLoad() {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    seed = generator.current_seed();
    state = generator.get_state();
  }
};
const DefaultGeneratorAtLoad default_generator_at_load;

}  // namespace

void agree_on_default_generator(c10d::Store& store, int rank, std::chrono::milliseconds timeout) {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  uint64_t seed = 0;
  bool drawn = false;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    seed = generator.current_seed();
    drawn = !torch::equal(generator.get_state(), default_generator_at_load.state);
  }
  // A seed set by the program (the same on every rank, or per rank on
  // purpose) is the program's: it stays.
  const bool seeded_by_program = seed != default_generator_at_load.seed;
  const std::string key = "fabric/default_generator_seed";
  if (rank == 0) {
    const std::string text = std::to_string(seed);
    store.set(key, std::vector<uint8_t>(text.begin(), text.end()));
  } else {
    store.wait({key}, timeout);
  }
  if (seeded_by_program) return;
  const std::vector<uint8_t> value = store.get(key);
  const uint64_t seed_of_rank_0 = std::stoull(std::string(value.begin(), value.end()));
  torch::manual_seed(seed_of_rank_0);  // also every CUDA device's generator
  // Every rank runs the same code: rank 0 speaks for all, once.
  if (drawn && rank == 0) {
    write_stderr_line(
        "fabric: the program drew random numbers from LibTorch's default generator before "
        "launch() without seeding it; those numbers differ between the ranks (this LibTorch "
        "seeds every process differently). From launch() on, every rank draws from rank 0's "
        "seed. Seed first (fabric::seed_everything(seed) or torch::manual_seed(seed) at the top "
        "of main) to draw the same numbers before launch() too.");
  }
}

}  // namespace detail

uint64_t seed_everything(uint64_t seed) {
  torch::manual_seed(seed);  // also every CUDA device's generator
  std::srand(static_cast<unsigned>(seed));
  ::setenv("PL_GLOBAL_SEED", std::to_string(seed).c_str(), 1);
  return seed;
}

}  // namespace fabric
