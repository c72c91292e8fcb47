// The zero strategies' parts that are not inline (zero.h).
#include "strategies/zero.h"

namespace fabric {
namespace detail {

size_t bytes_of(const at::Tensor& tensor) { return static_cast<size_t>(tensor.numel()) * tensor.element_size(); }

std::vector<at::Tensor> optimizer_parameters(const torch::optim::Optimizer& optimizer) {
  std::vector<at::Tensor> parameters;
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& parameter : group.params()) parameters.push_back(parameter);
  }
  return parameters;
}

std::unique_ptr<torch::optim::OptimizerParamState> new_parameter_state(const torch::optim::Optimizer& optimizer) {
  namespace optim = torch::optim;
  if (dynamic_cast<const optim::AdamW*>(&optimizer)) return std::make_unique<optim::AdamWParamState>();
  if (dynamic_cast<const optim::Adam*>(&optimizer)) return std::make_unique<optim::AdamParamState>();
  if (dynamic_cast<const optim::SGD*>(&optimizer)) return std::make_unique<optim::SGDParamState>();
  if (dynamic_cast<const optim::RMSprop*>(&optimizer)) {
    return std::make_unique<optim::RMSpropParamState>();
  }
  if (dynamic_cast<const optim::Adagrad*>(&optimizer)) {
    return std::make_unique<optim::AdagradParamState>();
  }
  // A user-defined optimizer: a copy of a state rank 0 holds has the right
  // dynamic type; deserializing replaces its fields.
  if (!optimizer.state().empty()) return optimizer.state().begin()->second->clone();
  throw std::runtime_error(
      "fabric::save: cannot gather the state of this optimizer type under a sharded strategy: "
      "Fabric does not know its per-parameter state type and rank 0 holds no state to copy it "
      "from. Use strategy 'ddp' for it, or step it once on every rank before saving");
}

std::unique_ptr<Strategy> make_zero_strategy(const StrategyContext& context, int stage) {
  if (stage != 1 && stage != 2) throw std::logic_error("fabric: zero has stages 1 and 2 (fsdp is the third)");
  return std::make_unique<ZeroStrategy>(context, stage);
}

}  // namespace detail
}  // namespace fabric
