// The data the program reads itself (fabric/data_sharding.h): Fabric's
// shard_range/shard_elements shares, shard of tensors, randperm, shuffle's
// collective, per-rank random streams, the free functions for code without
// a Fabric at hand, and backward's check for ranks that train on the same
// batches.
#include "data_sharding.h"

#include <fabric/fabric.h>

#include "plugins/environments/cluster_environment.h"
#include "plugins/environments/process_placement.h"
#include "strategies/strategy.h"
#include "utilities/environment_variables.h"
#include "utilities/messages.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <stdexcept>
#include <string>

namespace fabric {
namespace detail {
namespace {

// The Fabric launched in this process (the free functions use it), and the
// world size of one constructed with several processes but not launched yet.
std::atomic<Fabric*> launched_fabric{nullptr};
std::atomic<int> constructed_world_size{0};

// splitmix64's finalizer: this rank's own seed from the shared one.
uint64_t own_seed(uint64_t shared_seed, int global_rank) {
  uint64_t z = shared_seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(global_rank) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

at::Generator cuda_generator(const torch::Device& device) { return at::globalContext().defaultGenerator(device); }

// Into `generator`: this rank's own stream (`own`, or a fresh one seeded
// from the shared seed); the shared stream is kept in `shared`.
void swap_in(at::Generator generator, torch::Tensor& shared, const torch::Tensor& own, int global_rank) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  shared = generator.get_state();
  if (own.defined()) {
    generator.set_state(own);
  } else {
    generator.set_current_seed(own_seed(generator.current_seed(), global_rank));
  }
}

// Out of `generator`: its stream into `own`, the shared one back.
void swap_out(at::Generator generator, torch::Tensor& shared, torch::Tensor& own) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  own = generator.get_state();
  generator.set_state(shared);
  shared = torch::Tensor();
}

torch::Tensor state_of(at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

// `shared` into the generator, or inside a guard, where it puts it back
// from; then `own` (undefined: a stream never used) for this rank.
void restore_streams(at::Generator generator, bool inside, const torch::Tensor& shared, const torch::Tensor& own,
                     torch::Tensor& saved_shared, torch::Tensor& saved_own, int global_rank) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  if (!inside) {
    generator.set_state(shared);
    saved_own = own;
    return;
  }
  saved_shared = shared;
  if (own.defined()) {
    generator.set_state(own);
  } else {
    generator.set_state(shared);
    generator.set_current_seed(own_seed(generator.current_seed(), global_rank));
  }
}

// How many processes the environment says this process's job has: the
// launchers' and schedulers' variables, and a Fabric constructed with
// several processes that has not been launched.
int job_size_from_environment() {
  long size = std::max<long>(1, integer_variable("WORLD_SIZE").value_or(1));
  for (const auto& environment : built_in_environments()) {
    if (const auto placement = environment->detect()) size = std::max<long>(size, placement->world_size);
  }
  size = std::max<long>(size, constructed_world_size.load());
  // A rank that Fabric's launcher started is never alone (its WORLD_SIZE
  // says how many there are).
  if (started_by_fabric_launcher()) size = std::max<long>(size, 2);
  return static_cast<int>(size);
}

}  // namespace

// ---- per-rank random streams ---------------------------------------------------

void PerRankStreams::enter() {
  if (depth_++ > 0) return;
  swap_in(at::detail::getDefaultCPUGenerator(), shared_cpu_, own_cpu_, global_rank_);
  if (device_.is_cuda()) swap_in(cuda_generator(device_), shared_cuda_, own_cuda_, global_rank_);
}

void PerRankStreams::leave() {
  if (--depth_ > 0) return;
  swap_out(at::detail::getDefaultCPUGenerator(), shared_cpu_, own_cpu_);
  if (device_.is_cuda()) swap_out(cuda_generator(device_), shared_cuda_, own_cuda_);
}

LocalGeneratorStates PerRankStreams::states() const {
  LocalGeneratorStates states;
  const torch::Tensor cpu = state_of(at::detail::getDefaultCPUGenerator());
  const torch::Tensor cuda = device_.is_cuda() ? state_of(cuda_generator(device_)) : torch::Tensor();
  if (depth_ > 0) {
    states = {shared_cpu_, shared_cuda_, cpu, cuda};
  } else {
    states = {cpu, cuda, own_cpu_, own_cuda_};
  }
  return states;
}

void PerRankStreams::restore(const LocalGeneratorStates& states) {
  const bool inside = depth_ > 0;
  restore_streams(at::detail::getDefaultCPUGenerator(), inside, states.cpu, states.own_cpu, shared_cpu_, own_cpu_,
                  global_rank_);
  if (device_.is_cuda() && states.cuda.defined()) {
    restore_streams(cuda_generator(device_), inside, states.cuda, states.own_cuda, shared_cuda_, own_cuda_,
                    global_rank_);
  }
}

// ---- ranks that train on the same batches ---------------------------------------

void DuplicateDataCheck::check(Fabric& fabric, const at::Tensor& loss, uint64_t synchronization,
                               const std::function<at::Tensor(const at::Tensor&)>& reduce) {
  next_pass_ = 2 * next_pass_ - 1;  // 3, 5, 9, 17, 33, ...
  // The only synchronization with the device, at these passes only.
  const double value = loss.detach().to(at::kDouble).sum().cpu().item<double>();
  const bool finite = std::isfinite(value);
  // Max of (v, -v): every rank's loss was the same iff max == -max(-v).
  const at::Tensor mine = torch::tensor({finite ? value : 0.0, finite ? -value : 0.0, finite ? 0.0 : 1.0}, at::kDouble);
  const at::Tensor reduced = reduce(mine).cpu();
  const double* all = reduced.data_ptr<double>();
  if (all[2] != 0.0) return;  // a rank's loss is not finite: proves nothing
  if (all[0] != -all[1]) {
    decided_ = true;  // the ranks computed different losses: their data differs
    return;
  }
  if (value == 0.0) return;  // a zero loss everywhere proves nothing
  identical_.emplace_back(synchronization, value);
  if (identical_.size() < 3) return;
  // A loss that does not change (a constant) proves nothing either.
  const bool constant = std::all_of(identical_.begin(), identical_.end(),
                                    [&](const auto& sample) { return sample.second == identical_.front().second; });
  if (constant) return;
  decided_ = true;
  if (!fabric.is_global_zero()) return;
  const std::string n = std::to_string(fabric.world_size());
  write_stderr_line(
      "fabric: every rank computed the same loss at backward passes " + std::to_string(identical_[0].first) + ", " +
      std::to_string(identical_[1].first) + " and " + std::to_string(identical_.back().first) +
      ": the ranks are training on the same batches. Each of the " + n +
      " ranks does the work of one, so the job spends " + n +
      " times the compute for one rank's progress and runs no faster than one process. Give each rank its share of "
      "the data: fabric.setup_dataloader(dataset, options) for a torch::data loader; fabric.shard_range(begin, end, "
      "step) or fabric.shard_elements(batches) for a loop over positions or prepared batches; "
      "fabric::shard(indices) in a loader class of the program's own; and draw per-rank random data (synthetic "
      "batches, RL exploration) inside { auto per_rank = fabric.per_rank_random(); ... }. fabricize reports such "
      "a loop as fabric-own-dataloader. (Printed once, by rank 0.)");
}

// ---- the Fabric's sharding state, the launched Fabric ---------------------------

DataSharding::DataSharding(Fabric& fabric, int world_size, int global_rank, torch::Device device)
    : streams(global_rank, device), fabric_(fabric), world_size_(world_size) {
  if (world_size_ > 1) constructed_world_size.store(world_size_);
}

DataSharding::~DataSharding() {
  Fabric* self = &fabric_;
  launched_fabric.compare_exchange_strong(self, nullptr);
  int mine = world_size_;
  if (mine > 1) constructed_world_size.compare_exchange_strong(mine, 0);
}

void DataSharding::launch(const std::function<void()>& start) {
  Fabric* other = launched_fabric.load();
  // Two Fabrics of one process each (a test comparing precisions) are no
  // job: the free functions give the same answers for either.
  if (other != nullptr && other != &fabric_ && (world_size_ > 1 || other->world_size() > 1)) {
    throw std::logic_error(
        "fabric.launch(): another fabric::Fabric is launched in this process, and a process takes part in one job. "
        "Launch one Fabric (fabricize puts it at the top of main) and pass it where it is needed, or let the first "
        "one be destroyed before launching another");
  }
  start();
  if (other == nullptr) launched_fabric.store(&fabric_);
  int mine = world_size_;
  if (mine > 1) constructed_world_size.compare_exchange_strong(mine, 0);
}

std::shared_ptr<ShareSite> DataSharding::site(const char* file, int line) {
  auto& site = sites_[std::string(file != nullptr ? file : "?") + ":" + std::to_string(line)];
  if (!site) site = std::make_shared<ShareSite>();
  return site;
}

void record_share(const char* file, int line, uint64_t total, uint64_t mine) {
  if (!verify::recording()) return;
  verify::detail::Recorder::instance().share(std::string(file != nullptr ? file : "?") + ":" + std::to_string(line),
                                             total, mine);
}

int launched_world_size(const char* caller) {
  if (const Fabric* fabric = launched_fabric.load()) return fabric->world_size();
  const int job = job_size_from_environment();
  if (job == 1) return 1;
  throw std::logic_error(std::string(caller) + " was called before fabric.launch() in a job of " + std::to_string(job) +
                         " processes: this process does not know its rank yet, nor its share of the data. Construct "
                         "the fabric::Fabric and call fabric.launch() first, before anything that calls " +
                         caller + " (fabricize puts both at the top of main)");
}

std::vector<int64_t> shard_with_launched_fabric(std::vector<int64_t> order, bool pad, const char* file, int line) {
  return launched_fabric.load()->shard(std::move(order), pad, file, line);
}

}  // namespace detail

int global_rank() {
  if (const Fabric* fabric = detail::launched_fabric.load()) return fabric->global_rank();
  detail::launched_world_size("fabric::global_rank");
  return 0;
}

int world_size() { return detail::launched_world_size("fabric::world_size"); }

namespace {

void check_order_tensor(const torch::Tensor& order) {
  if (order.defined() && order.dim() == 1 && c10::isIntegralType(order.scalar_type(), /*includeBool=*/false)) return;
  throw std::invalid_argument(
      "fabric::shard: the order must be a 1-D tensor of integer indices (torch::randperm(n), torch::arange(n)), "
      "not " +
      (order.defined() ? "a tensor of shape " + c10::str(order.sizes()) + " and dtype " + c10::str(order.scalar_type())
                       : std::string("an undefined tensor")));
}

}  // namespace

torch::Tensor shard(const torch::Tensor& order, bool pad, const char* file, int line) {
  check_order_tensor(order);
  if (detail::launched_world_size("fabric::shard") == 1) {
    detail::record_share(file, line, static_cast<uint64_t>(order.numel()), static_cast<uint64_t>(order.numel()));
    return order;
  }
  return detail::launched_fabric.load()->shard(order, pad, file, line);
}

torch::Tensor shard(const torch::Tensor& order, const char* file, int line) {
  return shard(order, torch::GradMode::is_enabled(), file, line);
}

// ---- Fabric's members ------------------------------------------------------------

std::vector<int64_t> Fabric::broadcast_order(std::vector<int64_t> order, const char* call) {
  return strategy().collectives().broadcast_order(std::move(order), call);
}

std::vector<int64_t> Fabric::shard_order(std::vector<int64_t> order, bool pad, const char* file, int line) {
  const auto world = static_cast<uint64_t>(world_size());
  const auto rank = static_cast<uint64_t>(global_rank());
  const auto total = static_cast<uint64_t>(order.size());
  order = broadcast_order(std::move(order), "fabric.shard()");
  detail::record_share(file, line, total, total > rank ? (total - rank + world - 1) / world : 0);
  return strided_shard(order, world, rank, pad);
}

torch::Tensor Fabric::shard(const torch::Tensor& order, bool pad, const char* file, int line) {
  check_order_tensor(order);
  if (world_size() == 1) {
    detail::record_share(file, line, static_cast<uint64_t>(order.numel()), static_cast<uint64_t>(order.numel()));
    return order;
  }
  const torch::Tensor values = order.to(torch::kCPU, torch::kLong).contiguous();
  std::vector<int64_t> indices(values.data_ptr<int64_t>(), values.data_ptr<int64_t>() + values.numel());
  const std::vector<int64_t> mine = shard_order(std::move(indices), pad, file, line);
  return torch::tensor(mine, torch::kLong).to(order.device(), order.scalar_type());
}

detail::Share Fabric::share_of(uint64_t total, const char* file, int line) {
  const auto world = static_cast<uint64_t>(world_size());
  const auto rank = static_cast<uint64_t>(global_rank());
  detail::Share share(total, world, rank, world > 1 ? sharding_->site(file, line) : nullptr, backward_pass_counter());
  detail::record_share(file, line, total, share.real_count());
  return share;
}

torch::Tensor Fabric::randperm(int64_t n, torch::TensorOptions options) {
  torch::Tensor drawn = torch::randperm(n, options);
  if (world_size() == 1) return drawn;
  auto scope = strategy().collectives().scope("fabric.randperm()");
  // As int64: every backend broadcasts it, and every permutation fits.
  const torch::Tensor rank_zero = broadcast(drawn.to(torch::kLong), 0);
  torch::NoGradGuard no_grad;
  drawn.copy_(rank_zero);
  return drawn;
}

PerRankRandom Fabric::per_rank_random() { return PerRankRandom(world_size() > 1 ? &sharding_->streams : nullptr); }

PerRankRandom::PerRankRandom(detail::PerRankStreams* streams) : streams_(streams) {
  if (streams_ != nullptr) streams_->enter();
}

PerRankRandom::~PerRankRandom() {
  if (streams_ != nullptr) streams_->leave();
}

detail::LocalGeneratorStates Fabric::generator_states() const { return sharding_->streams.states(); }

void Fabric::restore_generator_states(const detail::LocalGeneratorStates& states) {
  sharding_->streams.restore(states);
}

void Fabric::watch_for_duplicate_data(const torch::Tensor& loss, uint64_t synchronization) {
  if (!sharding_->duplicates.due(synchronization)) return;
  auto& collectives = strategy().collectives();
  auto scope = collectives.scope("fabric.backward()");
  sharding_->duplicates.check(*this, loss, synchronization, [&collectives](const at::Tensor& values) {
    return collectives.all_reduce(values, ReduceOp::Max);
  });
}

}  // namespace fabric
