// The Strategy base: launch, plugins, backward, clipping; see strategy.h.
#include "strategies/strategy.h"

#include "utilities/agreement.h"
#include "utilities/environment_variables.h"
#include "utilities/messages.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace fabric {
namespace detail {

void Strategy::attach(StrategyPlugins plugins) {
  if (!plugins.collectives || !plugins.precision || !plugins.checkpoint_io)
    throw std::logic_error("fabric: a strategy needs its collectives, precision and checkpoint IO");
  plugins_ = std::move(plugins);
}

void Strategy::launch() {
  Collectives& collectives = this->collectives();
  if (collectives.launched()) throw std::logic_error("fabric: launch() was called twice");
  collectives.mark_launched();
  // A rank other than 0 that a launcher of Fabric's started printed what
  // main printed before launch() to /dev/null (rank 0 prints it once); its
  // standard output is the launcher's from here on.
  restore_stdout_at_launch();
  const ProcessPlacement& placement = collectives.placement();
  if (placement.world_size == 1) return;

#ifdef USE_C10D_NCCL
  if (context_.device.is_cuda()) c10::cuda::set_device(context_.device.index());
#endif
  if (placement.launcher == "fabric") watch_launcher_channel(placement.global_rank);

  // N processes that each start one intra-op thread per core would run
  // N x cores threads and mostly wait on each other; split the cores instead
  // (torchrun sets OMP_NUM_THREADS=1 for the same reason; it wins if set).
  if (environment_string("OMP_NUM_THREADS", "").empty()) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    torch::set_num_threads(std::max(1, cores / placement.local_world_size));
  }

  const bool starts_local_ranks = placement.launcher.empty() && placement.local_world_size > 1;
  setup_environment(starts_local_ranks);
  report_joined();
}

void Strategy::setup_environment(bool starts_local_ranks) {
  try {
    collectives().connect(starts_local_ranks);
  } catch (...) {
    // A connect that fails after the group exists (the generator's
    // agreement, the monitor's store) leaves the strategy on that group
    // too, so that a program that goes on finds them consistent.
    use_group(collectives().group());
    throw;
  }
  use_group(collectives().group());
}

BackwardGraph BackwardGraph::of(const at::Tensor& loss) {
  BackwardGraph graph;
  if (!loss.grad_fn()) return graph;
  std::vector<const torch::autograd::Node*> pending{loss.grad_fn().get()};
  graph.nodes.insert(pending.back());
  while (!pending.empty()) {
    const torch::autograd::Node* node = pending.back();
    pending.pop_back();
    for (const auto& edge : node->next_edges()) {
      const torch::autograd::Node* next = edge.function.get();
      if (next != nullptr && graph.nodes.insert(next).second) pending.push_back(next);
    }
  }
  return graph;
}

void Strategy::backward(const at::Tensor& loss, const std::vector<SetUpModelInBackward>& set_up,
                        const BackwardArguments& arguments, const std::function<void(bool)>& after_pass) {
  // With several set-up models (a GAN's generator and discriminator), each
  // loss reaches only some of them, and the strategy acts only on those it
  // reaches (a DDP Reducer armed for a backward that never reaches its
  // parameters would wait for their gradients forever).
  const bool scaling = precision().scales_loss();
  const BackwardGraph graph = needs_reached_models() || scaling ? BackwardGraph::of(loss) : BackwardGraph();
  auto reaches_any = [&graph](const NamedParameters& parameters) {
    for (const auto& parameter : parameters) {
      if (graph.reaches(parameter.second)) return true;
    }
    return false;
  };
  // Under no_backward_sync a model's gradients stay local (not
  // synchronized), and the next synchronized backward reduces the
  // accumulated sum.
  std::vector<ReachedModel> models;
  std::vector<GradientsInBackward> gradients;
  bool synchronized_any = false;
  if (!graph.nodes.empty()) {
    for (const auto& model : set_up) {
      if (!reaches_any(*model.parameters)) continue;
      models.push_back({model.module, model.synchronized, &graph});
      gradients.push_back({model.parameters, model.synchronized});
      synchronized_any = synchronized_any || model.synchronized;
    }
  }
  if (loss.grad_fn() && (set_up.empty() || (!graph.nodes.empty() && models.empty())))
    warn_backward_without_set_up_model(set_up.empty());

  // Outside the collective: an error here involves no other rank.
  check_backward(models);
  ScaledBackward scaled = scaling ? precision().begin_scaled_backward(gradients) : ScaledBackward();
  collectives().run("fabric.backward()", [&] {
    // The backward pass runs outside autocast: a migrated loop opens
    // fabric.autocast() before its forward, and the scope usually still
    // holds at fabric.backward(loss). Each backward op runs in the dtype
    // autocast chose for its forward op (as PyTorch advises: no backward
    // under autocast).
    AutocastPause no_autocast(device().type());
    before_backward(models, loss);
    (scaling ? precision().scale(loss) : loss)
        .backward(arguments.gradient, arguments.retain_graph, arguments.create_graph);
    after_backward(models);
  });
  after_pass(synchronized_any);
  if (scaling) {
    precision().finish_scaled_backward(scaled, gradients, [this](bool local_inf) {
      return collectives().run("fabric.backward() (loss scaler)", [&] { return agree_any(local_inf); });
    });
  }
}

void Strategy::warn_backward_without_set_up_model(bool none_set_up) {
  const ProcessPlacement& placement = collectives().placement();
  if (placement.world_size == 1 || warned_backward_without_set_up_model_) return;
  warned_backward_without_set_up_model_ = true;
  if (placement.global_rank != 0) return;
  write_stderr_line(
      "fabric: warning: fabric.backward() runs on " + std::to_string(placement.world_size) + " processes, but " +
      (none_set_up ? "no model was passed to fabric.setup()" : "the loss reaches no model passed to fabric.setup()") +
      ", so the gradients are not all-reduced: every rank trains its own copy of the model "
      "on its own data. Call fabric.setup(model, optimizer) once the optimizer exists, "
      "before training. (Printed once, by rank 0.)");
}

at::Tensor Strategy::clip_gradients(torch::nn::Module& module, c10::optional<double> clip_val,
                                    c10::optional<double> max_norm, double norm_type, bool error_if_nonfinite) {
  if (clip_val.has_value() == max_norm.has_value()) {
    throw std::invalid_argument("fabric::clip_gradients: pass exactly one of clip_val and max_norm");
  }
  std::vector<at::Tensor> gradients;
  for (const auto& parameter : module.parameters()) {
    if (parameter.grad().defined()) gradients.push_back(parameter.grad());
  }
  // Under zero2 each rank holds only its own parameters' gradients: the
  // total norm combines the ranks' partial ones (every rank takes part, also
  // one that owns no gradient).
  const bool sharded = shards_gradients();
  const auto zero = [&] { return torch::zeros({}, torch::TensorOptions().device(context_.device)); };
  if (gradients.empty() && !sharded) return zero();
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> norms;
  for (const auto& gradient : gradients) {
    norms.push_back(gradient.detach().norm(norm_type).to(torch::kFloat));
  }
  at::Tensor total;
  if (!sharded) {
    total = std::isinf(norm_type) ? torch::stack(norms).max() : torch::stack(norms).norm(norm_type);
  } else if (std::isinf(norm_type)) {
    const auto local = norms.empty() ? zero() : torch::stack(norms).max();
    total = collectives().all_reduce(local, ReduceOp::Max);
  } else {
    const auto local = norms.empty() ? zero() : torch::stack(norms).pow(norm_type).sum();
    total = collectives().all_reduce(local, ReduceOp::Sum).pow(1.0 / norm_type);
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

}  // namespace detail
}  // namespace fabric
