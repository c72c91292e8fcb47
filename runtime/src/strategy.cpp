// The single_device and ddp strategies; see strategy.h.
#include "strategy.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace fabric {
namespace detail {

namespace {
constexpr size_t kMiB = 1024 * 1024;
// PyTorch DDP's first bucket: small, so that communication starts early.
constexpr size_t kFirstBucketBytes = 1 * kMiB;

class SingleDeviceStrategy : public Strategy {
 public:
  using Strategy::Strategy;
};
} // namespace

std::pair<size_t, size_t> bucket_bytes(const Options& options) {
  const auto cap = static_cast<size_t>(std::llround(options.bucket_cap_mb() * kMiB));
  const size_t bucket = std::max<size_t>(cap, 1);
  return {std::min(kFirstBucketBytes, bucket), bucket};
}

DdpStrategy::DdpStrategy(const StrategyContext& context) : Strategy(context) {}
DdpStrategy::~DdpStrategy() = default;

void DdpStrategy::setup_module(const torch::nn::Module& module, const NamedParameters& trained) {
  if (!context_.group || trained.empty()) return;
  std::vector<at::Tensor> parameters;
  for (const auto& item : trained) parameters.push_back(item.second);
  const auto [first_bucket, bucket] = bucket_bytes(context_.options);
  // As PyTorch's DDP: a small first bucket, then bucket_cap_mb buckets; both
  // lists reversed because gradients arrive roughly in reverse order of
  // parameter creation.
  auto assignment = c10d::compute_bucket_assignment_by_size(
      parameters, {first_bucket, bucket}, std::vector<bool>(parameters.size(), false));
  auto bucket_indices = std::move(std::get<0>(assignment));
  auto per_bucket_size_limits = std::move(std::get<1>(assignment));
  std::reverse(bucket_indices.begin(), bucket_indices.end());
  std::reverse(per_bucket_size_limits.begin(), per_bucket_size_limits.end());
  auto reducer = c10d_compat::make_reducer(
      std::move(parameters), std::move(bucket_indices), std::move(per_bucket_size_limits),
      context_.group, static_cast<int64_t>(bucket), static_cast<int64_t>(first_bucket),
      context_.options.find_unused_parameters());
  reducers_.push_back({&module, std::move(reducer)});
}

void DdpStrategy::before_backward(const std::vector<ReachedModel>& models,
                                  const at::Tensor& loss) {
  // C++ offers no hook around the user's forward(), where PyTorch's DDP arms
  // its Reducer. Arming it here is equivalent: nothing reaches the Reducer
  // between forward and backward. rebuild_buckets() is a collective that
  // reorders buckets once, after the first backward, by gradient arrival.
  // A model that this backward does not reach, or that is under
  // no_backward_sync, is not armed: a Reducer armed for a backward that
  // never reaches its parameters would wait for them forever, and an unarmed
  // one lets gradients accumulate locally.
  for (auto& model : reducers_) {
    const bool armed = std::any_of(models.begin(), models.end(), [&](const ReachedModel& reached) {
      return reached.module == model.module && reached.synchronized;
    });
    if (!armed) continue;
    try {
      model.reducer->prepare_for_forward();
      model.reducer->rebuild_buckets();
      // With find_unused_parameters the Reducer searches the graph from the
      // outputs for the parameters it does not reach and marks them ready.
      if (context_.options.find_unused_parameters()) {
        model.reducer->prepare_for_backward({loss});
      } else {
        model.reducer->prepare_for_backward({});
      }
    } catch (const c10::Error& error) {
      // The Reducer's own words are for Python users.
      const std::string message = error.what_without_backtrace();
      if (message.find("find_unused_parameters") == std::string::npos) throw;
      throw std::runtime_error(
          "fabric.backward(): the previous backward did not reach every trained parameter of "
          "a set-up model (a parameter took no part in computing the loss), so its gradient "
          "reduction never finished. If some parameters are unused on purpose, construct the "
          "Fabric with fabric::Options().find_unused_parameters(true); otherwise make every "
          "parameter take part in the loss, or set requires_grad(false) on the unused ones "
          "before fabric.setup(). Reducer: " +
          message.substr(0, message.find('\n')));
    }
  }
}

void DdpStrategy::forget_module(const torch::nn::Module* module) {
  // Its Reducer watches the old model's parameters, which no backward
  // reaches any more; destroying it removes its autograd hooks.
  reducers_.erase(std::remove_if(reducers_.begin(), reducers_.end(),
                                 [module](const ModelReducer& model) { return model.module == module; }),
                  reducers_.end());
}

std::unique_ptr<Strategy> make_strategy(const StrategyContext& context) {
  // Every strategy, by the name Options resolves to. Adding one: its class
  // in a file of its own with a factory, one line here, and its name (and
  // aliases) in options.cpp's table of strategy names.
  using Factory = std::unique_ptr<Strategy> (*)(const StrategyContext&);
  static const std::pair<const char*, Factory> kStrategies[] = {
      {"ddp", [](const StrategyContext& c) -> std::unique_ptr<Strategy> { return std::make_unique<DdpStrategy>(c); }},
      {"zero1", [](const StrategyContext& c) { return make_sharded_strategy(c, 1); }},
      {"zero2", [](const StrategyContext& c) { return make_sharded_strategy(c, 2); }},
      {"single_device",
       [](const StrategyContext& c) -> std::unique_ptr<Strategy> { return std::make_unique<SingleDeviceStrategy>(c); }},
  };
  for (const auto& [name, factory] : kStrategies)
    if (context.strategy == name) return factory(context);
  throw std::logic_error("fabric: no strategy named '" + context.strategy + "'");
}

} // namespace detail
} // namespace fabric
