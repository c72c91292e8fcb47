// The models passed to fabric.setup (and an optimizer's parameters that no
// set-up model owns), as a Fabric keeps them between its calls: each one's
// parameters, which of them the strategy synchronizes, and where their
// values live, so that a changed set (LoRA's phases) or a replaced parameter
// (torch::load, Module::load, set_, Module::to after setup) has its gradient
// synchronization rebuilt. Reaches the process group, precision and
// strategy through the strategy; only Fabric uses it.
#pragma once

#include "strategies/strategy.h"
#include "utilities/sync_check.h"

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <unordered_set>
#include <vector>

namespace fabric {
namespace detail {

// Where a tensor's values live, and as what.
struct ParameterPlace {
  const void* storage = nullptr;  // identity only, never dereferenced
  int64_t offset = 0;
  at::ScalarType dtype = at::kFloat;
  c10::Device device = c10::Device(c10::kCPU);
  std::vector<int64_t> sizes;
  static ParameterPlace of(const at::Tensor& tensor) {
    return {storage_of(tensor), tensor.storage_offset(), tensor.scalar_type(), tensor.device(), tensor.sizes().vec()};
  }
  // Read at every backward: no allocation, no reference count touched.
  bool holds(const at::Tensor& tensor) const {
    return storage == storage_of(tensor) && offset == tensor.storage_offset() && dtype == tensor.scalar_type() &&
           device == tensor.device() && tensor.sizes() == c10::IntArrayRef(sizes);
  }

 private:
  static const void* storage_of(const at::Tensor& tensor) {
    return tensor.unsafeGetTensorImpl()->storage().unsafeGetStorageImpl();
  }
};

// Every set-up model. A model held by value is not owned (`owner` is
// null) and may be destroyed before the Fabric, so nothing after setup
// dereferences `address`: backward, the sync check and the warnings use
// the parameter tensors kept here (the same tensors the model holds).
// An optimizer's parameters that no set-up model owned when
// setup_optimizer saw them are one more entry (`loose`): `owner` is a
// module of Fabric's own that holds those tensors (LooseParameters), so
// the strategies, backward, the loss scaler and the sync check treat them
// as a model.
struct SetUpModel {
  const torch::nn::Module* address = nullptr;
  std::shared_ptr<torch::nn::Module> owner;
  bool loose = false;
  NamedParameters parameters;
  // Per parameter: whether it required grad when the strategy last set up
  // the model's gradient synchronization (setup(), or a backward that
  // found the set changed: see SetUpModels::follow).
  std::vector<char> trained;
  // Per parameter: where its values lived when Fabric last synchronized
  // it. torch::load, Module::load, set_, set_data and Module::to give a
  // parameter new storage (LibTorch reads a checkpoint with set_, where
  // Python's load_state_dict copies in place); the gradient
  // synchronization built over the old one would no longer average it.
  std::vector<ParameterPlace> places;
  int no_sync_depth = 0;  // how many no_backward_sync guards hold it
  // `places` from the parameters as they are now.
  void record_places();
};

class SetUpModels {
 public:
  // `strategy` outlives every call; ~Fabric destroys it first, so the
  // destructor must not reach it.
  explicit SetUpModels(Strategy& strategy) : strategy_(strategy) {}
  SetUpModels(const SetUpModels&) = delete;
  SetUpModels& operator=(const SetUpModels&) = delete;

  // fabric.setup(model) (both overloads; `owner` is null for a model held
  // by value): on the device and in the precision, rank 0's values, the
  // strategy's synchronization over the parameters that require grad.
  void setup(torch::nn::Module& model, std::shared_ptr<torch::nn::Module> owner);
  // fabric.setup_optimizer(optimizer): its parameters that no set-up model
  // owns become a set of their own (set up as a model is); ones set up
  // before by another optimizer keep their set.
  void setup_optimizer_parameters(const torch::optim::Optimizer& optimizer);
  // Makes the strategy follow the set-up models' parameters: a model whose
  // set of parameters that require grad changed since the strategy last saw
  // it (LoRA: the adapters first, then every parameter), or one whose
  // parameters were replaced after setup (torch::load, Module::load, set_,
  // set_data, Module::to: new storage, dtype or device), gets its gradient
  // synchronization rebuilt. Every rank must find the same at the same
  // backward, replaced parameters holding the same values (checked: the
  // forward has used them, so rank 0's can no longer be broadcast).
  // `agree_anyway`: the ranks meet in the agreement even when this one
  // found nothing (the sync check is due at this backward on every rank): a
  // rank that replaced parameters alone is then named as such, not found
  // later in another collective.
  void follow(bool agree_anyway);

  // What the sync check compares: the set-up models' parameters (kept at
  // setup: a model held by value may be gone), named in their model (and
  // by its number when there are several), then `optimizer`'s others (when
  // given); each tensor once.
  std::vector<SyncCheck::Parameter> parameters_to_check(const torch::optim::Optimizer* optimizer) const;
  // fabric.step(optimizer): with several ranks, an optimizer none of whose
  // parameters belongs to a set-up model had its gradients never
  // all-reduced; rank 0 says so once. Checked once per optimizer until the
  // first warning.
  void warn_if_not_set_up(const torch::optim::Optimizer& optimizer);
  // What Strategy::backward needs of each, in setup order.
  std::vector<SetUpModelInBackward> in_backward() const;
  SetUpModel* find(const torch::nn::Module* address);
  const std::vector<SetUpModel>& all() const { return models_; }

 private:
  // Every parameter tensor of the set-up models (and loose sets).
  std::unordered_set<const c10::TensorImpl*> tensors() const;
  void broadcast_from_rank_zero(const char* call, const NamedParameters& parameters,
                                const std::vector<at::Tensor>& buffers);
  void release_loose_parameters(const NamedParameters& parameters);
  void setup_loose_parameters(NamedParameters loose);
  // {tag, hash, tensors, values, replaced}: what agree_on_trained_parameters
  // compares across ranks (the trained set's indices and shapes, the
  // replaced parameters' values).
  std::vector<int64_t> trained_set_fields(const std::vector<std::vector<size_t>>& replaced) const;
  void agree_on_trained_parameters(const std::vector<std::vector<size_t>>& replaced, const char* call);

  Strategy& strategy_;
  std::vector<SetUpModel> models_;
  // Optimizers whose parameters of no set-up model became a loose entry
  // (numbers them in messages), and whether rank 0 said what that leaves
  // out (the modules' buffers); whether rank 0 said that Fabric followed
  // replaced parameters.
  int loose_sets_ = 0;
  bool noted_loose_parameters_ = false;
  bool noted_replaced_parameters_ = false;
  // Optimizers seen to step a set-up model's parameters (never
  // dereferenced), and whether rank 0 warned of one that does not.
  std::unordered_set<const torch::optim::Optimizer*> optimizers_known_set_up_;
  bool warned_step_without_setup_ = false;
};

}  // namespace detail
}  // namespace fabric
