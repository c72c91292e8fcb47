// The multi-process runtime scenarios of one component (set-up models: unused parameters, training phases (LoRA), loose optimizer parameters, models held by value, parameters replaced after setup);
// test/runtime/multiprocess_program.cpp dispatches to them by name.
#include <fabric/fabric.h>

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "scenarios/scenarios.h"
#include "scenarios/support.h"

namespace fabric_test {

// A model whose second head takes part only on some steps (a branch, not a
// frozen part: `frozen` has requires_grad false and is used every step).
struct TwoHeadNetImpl : torch::nn::Module {
  TwoHeadNetImpl()
      : frozen(register_module("frozen", torch::nn::Linear(8, 8))),
        body(register_module("body", torch::nn::Linear(8, 16))),
        head1(register_module("head1", torch::nn::Linear(16, 4))),
        head2(register_module("head2", torch::nn::Linear(16, 4))) {
    for (auto& parameter : frozen->parameters()) parameter.requires_grad_(false);
  }
  torch::Tensor forward(const torch::Tensor& x, bool use_head2) {
    const auto hidden = torch::tanh(body(frozen(x)));
    auto output = head1(hidden);
    if (use_head2) output = output + head2(hidden);
    return output;
  }
  torch::nn::Linear frozen, body, head1, head2;
};
TORCH_MODULE(TwoHeadNet);

// Every trained parameter's gradient, by name (undefined ones as zeros).
std::map<std::string, torch::Tensor> gradients_of(torch::nn::Module& module) {
  std::map<std::string, torch::Tensor> gradients;
  for (const auto& item : module.named_parameters()) {
    if (!item.value().requires_grad()) continue;
    const auto& gradient = item.value().grad();
    gradients[item.key()] =
        gradient.defined() ? gradient.detach().clone() : torch::zeros_like(item.value());
  }
  return gradients;
}

// Compares the set-up model's gradients after a synchronized backward with
// the average over the ranks of what a plain copy computed locally (what
// DDP's result must be).
void check_averaged_gradients(fabric::Fabric& fabric, torch::nn::Module& model,
                              torch::nn::Module& local_copy, const std::string& what) {
  const auto actual = gradients_of(model);
  for (const auto& [name, local] : gradients_of(local_copy)) {
    const auto expected = fabric.all_reduce(local, fabric::ReduceOp::Mean);
    const auto found = actual.find(name);
    check(found != actual.end(), what + ": no gradient for " + name);
    const double error = (found->second - expected).abs().max().item<double>();
    check(error <= 1e-5 * (1 + expected.abs().max().item<double>()),
          what + ": the gradient of " + name + " differs from the ranks' average by " +
              std::to_string(error));
  }
}

// Parameters used on some steps only (issue 26): without
// find_unused_parameters, the first backward that leaves a trained
// parameter unused throws on every rank before anything is reduced, naming
// the parameters and the fix; with it (Options, or the strategy name
// "ddp_find_unused_parameters_true"), the ranks stay in sync through such
// steps, also with gradient accumulation and with a parameter used on one
// rank only. "zero2" needs no option. Run with FABRIC_CHECK_SYNC=1 (ctest),
// every fabric.step() is checked too. --uncaught: the error leaves main, as
// in a program that does not expect it (--unused-rank=R: only rank R leaves
// head2 unused).
int run_unused_checks(const Arguments& arguments) {
  auto options = fabric::Options().accelerator("cpu").devices(arguments.devices).strategy(
      arguments.strategy);
  if (arguments.find_unused) options.find_unused_parameters(true);
  fabric::Fabric fabric(options);
  fabric.launch();
  this_rank = fabric.global_rank();
  const int rank = this_rank;
  const std::string strategy = fabric.options().strategy();
  const bool find_unused = fabric.options().find_unused_parameters();
  // The Reducer (ddp, zero1) needs every parameter's gradient; zero2 reduces
  // what there is after backward.
  const bool expect_error = !find_unused && !gradients_on_owners(strategy);
  torch::manual_seed(71);
  TwoHeadNet model;
  torch::optim::SGD optimizer(model->parameters(), 0.05);
  fabric.setup(model, optimizer);
  auto batch = [&](int step) {
    torch::manual_seed(710 + 10 * step + rank);  // different data on every rank
    return torch::randn({6, 8});
  };
  auto train_step = [&](int step, bool use_head2) {
    optimizer.zero_grad();
    fabric.backward(model->forward(batch(step), use_head2).pow(2).mean());
    fabric.step(optimizer);
  };

  // Issue 38 point 3: a head the first backward reaches on no rank (a
  // segmentation model on a classification backbone whose fc the forward
  // never uses), find_unused_parameters unchosen: the job trains, in sync,
  // the head untouched. --how=first_rank1: rank 1 uses the head in its first
  // backward, rank 0 does not (they disagree: both stop).
  if (arguments.how == "first" || arguments.how == "first_rank1") {
    const auto head2_before = model->head2->weight.detach().clone();
    for (int step = 0; step < 4; ++step) {
      const bool use_head2 = arguments.how == "first_rank1" && rank == 1 && step == 0;
      train_step(step, use_head2);
      check(identical_across_ranks(fabric, *model), "ranks differ after step " + std::to_string(step));
    }
    check(torch::equal(head2_before, model->head2->weight.detach()), "head2 changed though no rank used it");
    fabric.print("unused at the first backward (" + strategy + "): trained in sync");
    return 0;
  }

  if (arguments.uncaught) {
    train_step(0, true);
    const bool skip = arguments.unused_rank < 0 || arguments.unused_rank == rank;
    std::fprintf(stderr, "test: rank %d %s head2 at step 1\n", rank, skip ? "skips" : "uses");
    train_step(1, !skip);
    train_step(2, true);
    fabric.print("unused scenario (uncaught) done");
    return 0;
  }

  // Both heads: nothing unused.
  train_step(0, true);
  // Gradient accumulation: a micro-batch without head2 under
  // no_backward_sync, then one with it, is no unused parameter.
  optimizer.zero_grad();
  {
    auto no_sync = fabric.no_backward_sync(model);
    fabric.backward(model->forward(batch(1), false).pow(2).mean());
  }
  fabric.backward(model->forward(batch(2), true).pow(2).mean());
  fabric.step(optimizer);
  check(identical_across_ranks(fabric, *model), "ranks differ after accumulating gradients");

  if (expect_error) {
    const auto before = module_state(*model);
    optimizer.zero_grad();
    const std::string error =
        error_of([&] { fabric.backward(model->forward(batch(3), false).pow(2).mean()); });
    const std::string what = "head2 unused under '" + strategy + "' without find_unused_parameters";
    check_error(error, "head2.weight, head2.bias", what);
    check_error(error, "2 trained parameters of a set-up model get no gradient", what);
    check_error(error, "on rank " + std::to_string(rank), what);
    check_error(error, "find_unused_parameters(true)", what);
    if (strategy == "ddp") check_error(error, "\"ddp_find_unused_parameters_true\"", what);
    check(error.find("body.") == std::string::npos && error.find("head1.") == std::string::npos &&
              error.find("frozen.") == std::string::npos,
          what + ": the message names parameters that were used or frozen: " + error);
    // Thrown before backward ran: no gradient, nothing reduced, and the job
    // goes on in sync when the next step uses every parameter.
    for (const auto& parameter : model->parameters()) {
      check(!parameter.grad().defined() || parameter.grad().abs().sum().item<double>() == 0,
            what + ": a gradient was computed before the error");
    }
    const auto after = module_state(*model);
    for (size_t i = 0; i < before.size(); ++i) {
      check(torch::equal(before[i], after[i]), what + ": the model changed");
    }
    train_step(4, true);
    check(identical_across_ranks(fabric, *model), what + ": ranks differ after the error");

    // A parameter frozen after setup leaves the synchronization (it used
    // to be reported as unused): no error, and it stays as it was.
    model->head1->bias.requires_grad_(false);
    const auto frozen_bias = model->head1->bias.detach().clone();
    model->head1->bias.mutable_grad() = torch::Tensor();
    train_step(5, true);
    check(torch::equal(frozen_bias, model->head1->bias.detach()),
          "head1.bias changed while frozen after setup");
    model->head1->bias.requires_grad_(true);
    train_step(6, true);
    check(identical_across_ranks(fabric, *model), "ranks differ after the frozen case");
    fabric.print("unused parameter without find_unused_parameters (" + strategy +
                 "): error names head2.weight, head2.bias");
    return 0;
  }

  // In sync through steps that leave head2 out (on every rank).
  for (int step = 3; step < 9; ++step) {
    const bool use_head2 = step % 2 == 0;
    const auto head2_before = model->head2->weight.detach().clone();
    const auto head1_before = model->head1->weight.detach().clone();
    train_step(step, use_head2);
    check(!torch::equal(head1_before, model->head1->weight.detach()), "head1 was not trained");
    check(torch::equal(head2_before, model->head2->weight.detach()) == !use_head2,
          use_head2 ? "head2 was not trained on a step that used it"
                    : "head2 changed on a step that did not use it");
    check(identical_across_ranks(fabric, *model),
          "ranks differ after step " + std::to_string(step) + " (" + strategy + ")");
  }

  // A plain copy of the model (not set up) gives each rank's local
  // gradients; the set-up model's must be their average over the ranks
  // (ddp, zero1: every rank holds them; zero2: checked through the step),
  // and the SGD step must apply that average.
  TwoHeadNet local_copy;
  auto start_from_model = [&] {
    torch::NoGradGuard no_grad;
    const auto from = module_state(*model);
    const auto to = module_state(*local_copy);
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
    for (auto& parameter : model->parameters()) parameter.mutable_grad() = torch::Tensor();
    for (auto& parameter : local_copy->parameters()) parameter.mutable_grad() = torch::Tensor();
  };
  auto check_step_applied_average = [&](const std::string& what) {
    if (!gradients_on_owners(strategy)) check_averaged_gradients(fabric, *model, *local_copy, what);
    const auto expected_gradients = gradients_of(*local_copy);
    std::map<std::string, torch::Tensor> before;
    for (const auto& item : model->named_parameters()) before[item.key()] = item.value().detach().clone();
    fabric.step(optimizer);
    for (const auto& item : model->named_parameters()) {
      if (!item.value().requires_grad()) continue;
      const auto average = fabric.all_reduce(expected_gradients.at(item.key()), fabric::ReduceOp::Mean);
      const auto expected = before[item.key()] - 0.05 * average;
      const double error = (item.value().detach() - expected).abs().max().item<double>();
      check(error <= 1e-6, what + ": the step did not apply the ranks' average gradient to " +
                               item.key() + " (off by " + std::to_string(error) + ")");
    }
    check(identical_across_ranks(fabric, *model), what + ": ranks differ after the step");
  };

  // head2 used on rank 1 only: its gradient is rank 1's divided by the
  // world size on every rank.
  start_from_model();
  fabric.backward(model->forward(batch(9), rank == 1).pow(2).mean());
  local_copy->forward(batch(9), rank == 1).pow(2).mean().backward();
  check_step_applied_average("head2 used on rank 1 only (" + strategy + ")");

  // Accumulation: head2 used in the micro-batch under no_backward_sync
  // only; the synchronized backward must still average its gradient.
  start_from_model();
  {
    auto no_sync = fabric.no_backward_sync(model);
    fabric.backward(model->forward(batch(10), true).pow(2).mean());
  }
  fabric.backward(model->forward(batch(11), false).pow(2).mean());
  local_copy->forward(batch(10), true).pow(2).mean().backward();
  local_copy->forward(batch(11), false).pow(2).mean().backward();
  check_step_applied_average("head2 used under no_backward_sync only (" + strategy + ")");

  // The same with head2 used under no_backward_sync on rank 0 only.
  start_from_model();
  {
    auto no_sync = fabric.no_backward_sync(model);
    fabric.backward(model->forward(batch(12), rank == 0).pow(2).mean());
  }
  fabric.backward(model->forward(batch(13), false).pow(2).mean());
  local_copy->forward(batch(12), rank == 0).pow(2).mean().backward();
  local_copy->forward(batch(13), false).pow(2).mean().backward();
  check_step_applied_average("head2 used under no_backward_sync on rank 0 only (" + strategy + ")");

  train_step(14, false);
  check(identical_across_ranks(fabric, *model), "ranks differ at the end (" + strategy + ")");
  fabric.print("parameters unused on some steps (" + strategy +
               (find_unused ? ", find_unused_parameters" : "") + "): trained in sync");
  return 0;
}

// A LoRA-style model: a base of two linear layers and a low-rank adapter
// beside the first.
struct LoraNetImpl : torch::nn::Module {
  LoraNetImpl()
      : base1(register_module("base1", torch::nn::Linear(8, 16))),
        base2(register_module("base2", torch::nn::Linear(16, 4))) {
    adapter_down = register_parameter("adapter_down", torch::randn({2, 8}) * 0.3);
    adapter_up = register_parameter("adapter_up", torch::randn({16, 2}) * 0.3);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    namespace F = torch::nn::functional;
    const auto adapted = F::linear(F::linear(x, adapter_down), adapter_up);
    return base2(torch::tanh(base1(x) + adapted));
  }
  std::vector<torch::Tensor> base_parameters() {
    auto parameters = base1->parameters();
    for (const auto& parameter : base2->parameters()) parameters.push_back(parameter);
    return parameters;
  }
  torch::nn::Linear base1, base2;
  torch::Tensor adapter_down, adapter_up;
};
TORCH_MODULE(LoraNet);

// Training phases that change which parameters are trained (LoRA): phase 1
// trains the adapter only (the base frozen before setup, optimizer A over
// the adapter), phase 2 unfreezes the base and trains everything with
// optimizer B (fabric.setup_optimizer), phase 3 freezes the base again after
// setup and goes back to optimizer A. In every step each trained
// parameter's gradient is the ranks' average of what a plain copy computes
// locally (ddp, zero1: every rank holds it; zero2: the step applied it),
// the SGD step applies exactly that, frozen parameters get no gradient,
// and the ranks hold identical models (FABRIC_CHECK_SYNC=1 from ctest
// checks every fabric.step as well). Then ranks that change the set
// differently at the same backward get a clear error on every rank, and
// training goes on once they agree again, also after fabric.setup(model,
// optimizer B) instead of setup_optimizer. --disagree=one: rank 1 alone
// unfreezes a parameter (the job must end with a message).
int run_phase_checks(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options()
                            .accelerator("cpu")
                            .devices(arguments.devices)
                            .strategy(arguments.strategy)
                            .bucket_cap_mb(arguments.bucket_cap_mb));
  fabric.launch();
  this_rank = fabric.global_rank();
  const int rank = this_rank;
  const std::string strategy = fabric.options().strategy();
  constexpr double kLearningRate = 0.05;
  torch::manual_seed(90 + rank);  // setup() must make the ranks' models equal
  LoraNet model;
  LoraNet local_copy;  // not set up: each rank's local gradients
  auto set_base_trained = [&](bool trained) {
    for (auto& parameter : model->base_parameters()) parameter.requires_grad_(trained);
  };
  set_base_trained(false);
  torch::optim::SGD optimizer_a({model->adapter_down, model->adapter_up}, kLearningRate);
  fabric.setup(model, optimizer_a);
  check(identical_across_ranks(fabric, *model), "ranks differ after setup");

  int step = 0;
  // One training step with `optimizer`, checked against the local copy.
  auto train_step = [&](torch::optim::Optimizer& optimizer, const std::string& phase) {
    const std::string what = phase + ", step " + std::to_string(step) + " (" + strategy + ")";
    {
      torch::NoGradGuard no_grad;
      const auto from = model->parameters();
      const auto to = local_copy->parameters();
      for (size_t i = 0; i < from.size(); ++i) {
        to[i].copy_(from[i]);
        to[i].requires_grad_(from[i].requires_grad());
      }
    }
    optimizer.zero_grad();
    for (auto& parameter : model->parameters()) parameter.mutable_grad() = torch::Tensor();
    for (auto& parameter : local_copy->parameters()) parameter.mutable_grad() = torch::Tensor();
    torch::manual_seed(900 + 10 * step + rank);  // different data on every rank
    const auto input = torch::randn({6, 8});
    fabric.backward(model->forward(input).pow(2).mean());
    local_copy->forward(input).pow(2).mean().backward();
    for (const auto& item : model->named_parameters()) {
      if (!item.value().requires_grad()) {
        check(!item.value().grad().defined(), what + ": frozen " + item.key() + " has a gradient");
      }
    }
    if (!gradients_on_owners(strategy)) check_averaged_gradients(fabric, *model, *local_copy, what);
    const auto local_gradients = gradients_of(*local_copy);
    std::map<std::string, torch::Tensor> before;
    for (const auto& item : model->named_parameters()) before[item.key()] = item.value().detach().clone();
    std::set<const void*> stepped;
    for (const auto& group : optimizer.param_groups()) {
      for (const auto& parameter : group.params()) stepped.insert(parameter.unsafeGetTensorImpl());
    }
    fabric.step(optimizer);
    for (const auto& item : model->named_parameters()) {
      torch::Tensor expected = before[item.key()];
      const auto local = local_gradients.find(item.key());
      if (stepped.count(item.value().unsafeGetTensorImpl()) > 0 && local != local_gradients.end()) {
        expected = expected - kLearningRate * fabric.all_reduce(local->second, fabric::ReduceOp::Mean);
      }
      const double error = (item.value().detach() - expected).abs().max().item<double>();
      check(error <= 1e-6, what + ": " + item.key() + " is off by " + std::to_string(error) +
                               " from the step with the ranks' average gradient");
    }
    check(identical_across_ranks(fabric, *model), what + ": ranks differ after the step");
    ++step;
  };

  for (int i = 0; i < 3; ++i) train_step(optimizer_a, "phase 1 (adapter only)");
  set_base_trained(true);
  torch::optim::SGD optimizer_b(model->parameters(), kLearningRate);
  fabric.setup_optimizer(optimizer_b);
  for (int i = 0; i < 3; ++i) train_step(optimizer_b, "phase 2 (everything)");
  set_base_trained(false);
  for (int i = 0; i < 2; ++i) train_step(optimizer_a, "phase 3 (base frozen after setup)");

  if (arguments.disagree == "one") {
    // Only rank 1 unfreezes base2's bias: the others are in another
    // collective. Not caught: the job must end, naming the cause.
    if (rank == 1) model->base2->bias.requires_grad_(true);
    std::fprintf(stderr, "test: rank %d %s base2.bias\n", rank,
                 rank == 1 ? "unfreezes" : "leaves frozen");
    // Two routes, both ending the job: rank 1 waits in the agreement while
    // rank 0 reduces gradients (the job monitor ends the job), or, at a
    // backward where the sampled sync check is due, both meet in the
    // agreement and throw (caught here as a program's main would).
    try {
      for (int i = 0; i < 2; ++i) train_step(optimizer_b, "after a change on rank 1 only");
    } catch (const std::runtime_error& error) {
      std::fprintf(stderr, "test: rank %d stops: %s\n", rank, error.what());
      return 1;
    }
    fabric.print("phases: the job went on although rank 1 alone changed the set");
    return 0;
  }

  // Every rank changes the set at the same backward, but not alike.
  (rank % 2 == 0 ? model->base1->bias : model->base2->bias).requires_grad_(true);
  for (auto& parameter : model->parameters()) parameter.mutable_grad() = torch::Tensor();
  const std::string error = error_of([&] {
    fabric.backward(model->forward(torch::randn({6, 8})).pow(2).mean());
  });
  check_error(error, "the ranks disagree on which parameters of the set-up models require grad",
              "ranks that unfreeze different parameters");
  check_error(error, "rank 0 trains 3 parameter tensors (64 values)", "ranks that unfreeze different parameters");
  check_error(error, "rank 1 trains 3 parameter tensors (52 values)", "ranks that unfreeze different parameters");
  check_error(error, "at the same step on every rank", "ranks that unfreeze different parameters");
  for (const auto& parameter : model->parameters()) {
    check(!parameter.grad().defined(), "a gradient was computed before the disagreement was reported");
  }
  // Agreeing again (both biases trained on every rank) trains in sync.
  model->base1->bias.requires_grad_(true);
  model->base2->bias.requires_grad_(true);
  for (int i = 0; i < 2; ++i) train_step(optimizer_b, "phase 4 (base biases unfrozen)");
  // The model set up again with the second optimizer (instead of
  // setup_optimizer), after another change: the same.
  set_base_trained(true);
  fabric.setup(model, optimizer_b);
  for (int i = 0; i < 2; ++i) train_step(optimizer_b, "phase 5 (set up again)");
  fabric.print("training phases (" + strategy + "): gradients are the ranks' average in every phase");
  return 0;
}

// ---- optimizers over parameters that no set-up model owns ----------------------

// A research program's model, which fabricize cannot set up: a class that is
// not a module owns modules it made with new and gathers their parameters.
struct Encoder : torch::nn::Module {
  Encoder() : fc(register_module("fc", torch::nn::Linear(8, 16))) {}
  torch::Tensor forward(const torch::Tensor& x) { return torch::tanh(fc(x)); }
  torch::nn::Linear fc;
};
struct Head : torch::nn::Module {
  Head() : fc(register_module("fc", torch::nn::Linear(16, 4))) {
    gain = register_parameter("gain", torch::randn({4}));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc(x) * gain; }
  torch::nn::Linear fc;
  torch::Tensor gain;
};
class Experiment {
 public:
  Experiment() : encoder_(new Encoder()), head_(new Head()) {}
  ~Experiment() {
    delete encoder_;
    delete head_;
  }
  Experiment(const Experiment&) = delete;
  Experiment& operator=(const Experiment&) = delete;
  torch::Tensor forward(const torch::Tensor& x) { return head_->forward(encoder_->forward(x)); }
  std::vector<torch::Tensor> parameters() {
    std::vector<torch::Tensor> parameters = encoder_->parameters();
    for (const auto& parameter : head_->parameters()) parameters.push_back(parameter);
    return parameters;
  }
  void to(torch::Dtype dtype) {
    encoder_->to(dtype);
    head_->to(dtype);
  }
  Encoder& encoder() { return *encoder_; }

 private:
  Encoder* encoder_ = nullptr;
  Head* head_ = nullptr;
};

// The generic trainer: the optimizer is made in train(), where fabricize
// puts fabric.setup_optimizer(optimizer). `hooks` lets the test look at
// every stage (on_setup, batch, after_backward, after_step).
template <class Model>
class Trainer {
 public:
  Trainer(fabric::Fabric& fabric, Model* model, bool set_up)
      : fabric_(fabric), model_(model), set_up_(set_up) {}
  template <class Hooks>
  void train(int steps, Hooks& hooks) {
    torch::optim::Adam optimizer(model_->parameters(), torch::optim::AdamOptions(0.01));
    if (set_up_) fabric_.setup_optimizer(optimizer);
    hooks.on_setup(optimizer);
    for (int i = 0; i < steps; ++i) {
      const torch::Tensor input = hooks.batch();
      optimizer.zero_grad();
      const torch::Tensor loss = model_->forward(input).pow(2).mean();
      fabric_.backward(loss);
      hooks.after_backward();
      fabric_.step(optimizer);
      hooks.after_step();
    }
  }

 private:
  fabric::Fabric& fabric_;
  Model* model_;
  bool set_up_;
};

// Checks a model trained through Fabric against a plain copy of it, stepped
// by its own optimizer on the ranks' average of the copy's local gradients
// (what every rank must compute). `reference_forward`: the copy's forward.
struct AveragedStepCheck {
  fabric::Fabric& fabric;
  std::string what;
  std::vector<torch::Tensor> trained;    // the Fabric's parameters (the optimizer's)
  std::vector<torch::Tensor> reference;  // the plain copy's, in the same order
  std::function<torch::Tensor(const torch::Tensor&)> reference_forward;
  torch::Dtype dtype = torch::kFloat;
  bool check_gradients = true;  // not under zero2 (owners only hold them)
  double tolerance = 0;         // 0: bit for bit
  bool sharded = false;         // zero1/zero2 on several ranks: ~1/N of the Adam state
  bool stage2 = false;          // zero2 on several ranks: ~1/N of the gradients
  bool pieces = false;          // fsdp on several ranks: gradients and state by element
  torch::optim::Optimizer* optimizer = nullptr;  // the Trainer's, while it trains
  std::unique_ptr<torch::optim::Adam> reference_optimizer;
  std::vector<torch::Tensor> averaged;
  int step = 0;

  std::string where() const { return what + ", step " + std::to_string(step); }
  void compare(const std::vector<torch::Tensor>& actual, const std::vector<torch::Tensor>& expected,
               const std::string& kind) {
    for (size_t i = 0; i < actual.size(); ++i) {
      check(actual[i].defined(), where() + ": no " + kind + " for parameter " + std::to_string(i));
      const double error = (actual[i] - expected[i]).abs().max().item<double>();
      check(error <= tolerance * (1 + expected[i].abs().max().item<double>()),
            where() + ": the " + kind + " of parameter " + std::to_string(i) + " is off by " +
                std::to_string(error) + " from the single process on the averaged gradient");
    }
  }
  std::vector<torch::Tensor> values(const std::vector<torch::Tensor>& tensors) const {
    std::vector<torch::Tensor> result;
    for (const auto& tensor : tensors) result.push_back(tensor.detach().clone());
    return result;
  }
  // Each trained tensor (fsdp: element) is held by exactly one rank, and no
  // rank holds all.
  void check_sharded(int64_t held, const std::string& kind) {
    int64_t total = 0;
    for (const auto& parameter : trained) total += pieces ? parameter.numel() : 1;
    const int64_t over_ranks = fabric.all_reduce(held, fabric::ReduceOp::Sum);
    check(over_ranks == total && held < total,
          where() + ": this rank holds the " + kind + " of " + std::to_string(held) + " of " +
              std::to_string(total) + " parameters, " + std::to_string(over_ranks) +
              " over all ranks (sharded: each one on exactly one rank)");
  }
  void on_setup(torch::optim::Optimizer& trainer_optimizer) {
    optimizer = &trainer_optimizer;
    if (!reference_optimizer) {
      check(identical_across_ranks(fabric, trained), what + ": ranks differ after setup_optimizer");
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < trained.size(); ++i) reference[i].copy_(trained[i]);
    } else {
      // Set up again (a new optimizer over the same parameters): nothing moves.
      compare(values(trained), values(reference), "value after the second setup_optimizer");
    }
    reference_optimizer = std::make_unique<torch::optim::Adam>(reference, torch::optim::AdamOptions(0.01));
  }
  torch::Tensor batch() {
    torch::manual_seed(1300 + 10 * step + fabric.global_rank());  // every rank its own data
    const torch::Tensor input = torch::randn({6, 8}).to(dtype);
    // The copy's local gradients, averaged over the ranks.
    reference_optimizer->zero_grad();
    reference_forward(input).pow(2).mean().backward();
    averaged.clear();
    for (const auto& parameter : reference) {
      averaged.push_back(fabric.all_reduce(parameter.grad(), fabric::ReduceOp::Mean));
    }
    return input;
  }
  void after_backward() {
    std::vector<torch::Tensor> gradients;
    for (const auto& parameter : trained) gradients.push_back(parameter.grad());
    if (stage2) {
      int64_t held = 0;
      for (const auto& gradient : gradients) held += gradient.defined() ? (pieces ? gradient.numel() : 1) : 0;
      check_sharded(held, "gradient");
    }
    if (pieces) {
      // Each rank's pieces against the same part of the averaged gradient.
      const auto offsets = piece_offsets(fabric, gradients);
      std::vector<torch::Tensor> held;
      std::vector<torch::Tensor> expected;
      for (size_t i = 0; i < gradients.size(); ++i) {
        if (!gradients[i].defined()) continue;
        held.push_back(gradients[i]);
        expected.push_back(piece_of(averaged[i], gradients[i], offsets[i]));
      }
      compare(held, expected, "gradient piece");
    }
    if (!check_gradients) return;
    compare(gradients, averaged, "gradient");
  }
  void after_step() {
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < reference.size(); ++i) reference[i].mutable_grad().copy_(averaged[i]);
    }
    reference_optimizer->step();
    compare(values(trained), values(reference), "value");
    check(identical_across_ranks(fabric, trained), where() + ": ranks differ after the step");
    if (sharded) {
      int64_t held = 0;
      for (const auto& entry : optimizer->state()) {
        const auto* adam = dynamic_cast<const torch::optim::AdamParamState*>(entry.second.get());
        held += pieces && adam != nullptr ? adam->exp_avg().numel() : 1;
      }
      check_sharded(held, "Adam state");
    }
    ++step;
  }
};

int run_loose_checks(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options()
                            .accelerator("cpu")
                            .devices(arguments.devices)
                            .strategy(arguments.strategy)
                            .precision(arguments.precision)
                            .bucket_cap_mb(arguments.bucket_cap_mb));
  fabric.launch();
  this_rank = fabric.global_rank();
  const int rank = this_rank;
  const std::string strategy = fabric.options().strategy();
  const std::string& precision = fabric.options().precision();
  const torch::Dtype dtype = precision == "64-true" ? torch::kDouble : torch::kFloat;
  const bool one_process = fabric.world_size() == 1;
  const std::string label = strategy + ", " + precision + ", " +
                            std::to_string(fabric.world_size()) + " process" +
                            (one_process ? "" : "es");

  torch::manual_seed(40 + rank);  // every rank builds different values
  Experiment experiment;
  Trainer<Experiment> trainer(fabric, &experiment, arguments.setup);
  if (!arguments.setup) {
    // Never set up: nothing is synchronized, and Fabric says so (the driver
    // reads the warnings).
    struct NoChecks {
      void on_setup(torch::optim::Optimizer&) {}
      torch::Tensor batch() { return torch::randn({6, 8}); }
      void after_backward() {}
      void after_step() {}
    } hooks;
    trainer.train(3, hooks);
    fabric.barrier("loose parameters not set up");
    return 0;
  }
  if (!one_process) {
    check(!identical_across_ranks(fabric, experiment.parameters()),
          "differently seeded ranks built identical models (the check would prove nothing)");
  }
  Experiment plain;  // each rank's plain copy
  if (dtype != torch::kFloat) plain.to(dtype);
  AveragedStepCheck hooks{fabric, "Experiment trained by setup_optimizer alone (" + label + ")",
                          experiment.parameters(), plain.parameters(),
                          [&](const torch::Tensor& input) { return plain.forward(input); }};
  hooks.dtype = dtype;
  hooks.check_gradients = !gradients_on_owners(strategy) || one_process;
  // Averages of 2 ranks are exact ((a + b) / 2 = a / 2 + b / 2 in floating
  // point), so every step is too.
  hooks.tolerance = fabric.world_size() <= 2 ? 0 : 1e-6;
  hooks.sharded = (strategy == "zero1" || gradients_on_owners(strategy)) && !one_process;
  hooks.stage2 = gradients_on_owners(strategy) && !one_process;
  hooks.pieces = strategy == "fsdp" && !one_process;
  trainer.train(3, hooks);
  for (const auto& parameter : experiment.parameters()) {
    check(parameter.scalar_type() == dtype,
          "precision " + precision + " was not applied to an optimizer parameter of no set-up "
          "model: it is " + std::string(c10::toString(parameter.scalar_type())));
  }
  // train() again: a new optimizer over the same parameters, set up again.
  trainer.train(2, hooks);

  // The encoder set up as a model now (as Lightning allows: one optimizer
  // over two models, the second set up later): its parameters leave the
  // optimizer's set and are synchronized with it, the head's stay.
  // (fsdp keeps the units it made at setup, and refuses this: its message
  // is checked in runtime.fsdp_training_phases_refused_2proc.)
  if (strategy != "fsdp") {
    fabric.setup_module(experiment.encoder());
    trainer.train(2, hooks);
  }

  // One set-up model, and an optimizer over it plus a loose extra tensor.
  torch::manual_seed(50 + rank);
  Net model;
  auto scale = torch::randn({4}, torch::requires_grad());
  std::vector<torch::Tensor> trained = model->parameters();
  trained.push_back(scale);
  torch::optim::Adam optimizer(trained, torch::optim::AdamOptions(0.01));
  fabric.setup(model, optimizer);
  if (!one_process) {
    check(identical_across_ranks(fabric, {scale}), "the extra tensor differs across ranks after setup");
    check(identical_across_ranks(fabric, *model), "the model differs across ranks after setup");
  }
  Net plain_model;
  auto plain_scale = torch::zeros({4}, torch::requires_grad());
  std::vector<torch::Tensor> reference = plain_model->parameters();
  reference.push_back(plain_scale);
  {
    torch::NoGradGuard no_grad;
    plain_model->offset.copy_(model->offset);  // the buffer (broadcast with the model)
    if (dtype != torch::kFloat) {
      plain_model->to(dtype);
      plain_scale.set_data(plain_scale.to(dtype));
    }
  }
  AveragedStepCheck mixed{fabric, "a set-up model plus a loose tensor (" + label + ")", trained,
                          reference, [&](const torch::Tensor& input) {
                            return plain_model->forward(input) * plain_scale;
                          }};
  mixed.dtype = dtype;
  mixed.check_gradients = hooks.check_gradients;
  mixed.tolerance = hooks.tolerance;
  mixed.sharded = hooks.sharded;
  mixed.stage2 = hooks.stage2;
  mixed.pieces = hooks.pieces;
  mixed.step = 100;
  mixed.on_setup(optimizer);
  for (int i = 0; i < 3; ++i) {
    const auto input = mixed.batch();
    optimizer.zero_grad();
    fabric.backward((model->forward(input) * scale).pow(2).mean());
    mixed.after_backward();
    fabric.step(optimizer);
    mixed.after_step();
  }
  check(scale.scalar_type() == dtype, "precision " + precision + " was not applied to the loose tensor");
  fabric.print("loose parameters (" + label + "): in sync, each step the averaged-gradient step");
  return 0;
}

// Trains a by-value model made here; returns whether the ranks stayed in
// sync. Called twice, the second model usually lives at the first one's
// address (same stack frame), after the first was destroyed.
bool train_local_model(fabric::Fabric& fabric, int seed, const void** address) {
  torch::manual_seed(seed + fabric.global_rank());  // different weights per rank
  PlainNet model;
  *address = &model;
  std::unique_ptr<torch::optim::Optimizer> optimizer =
      std::make_unique<torch::optim::SGD>(model.parameters(), 0.05);
  fabric.setup(model, *optimizer);
  const auto initial = model.first->weight.detach().clone();
  for (int step = 0; step < 4; ++step) {
    torch::manual_seed(900 + 10 * step + fabric.global_rank());  // different data per rank
    optimizer->zero_grad();
    fabric.backward(model.forward(torch::randn({6, 8})).pow(2).mean());
    fabric.step(*optimizer);
  }
  check(!torch::equal(initial, model.first->weight.detach()), "a by-value model did not train");
  return identical_across_ranks(fabric, model);
}

int run_by_value_checks(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();

  const void* first_address = nullptr;
  const void* second_address = nullptr;
  check(train_local_model(fabric, 10, &first_address), "a by-value model drifted apart across ranks");
  check(train_local_model(fabric, 20, &second_address),
        "a second by-value model (set up after the first was destroyed) drifted apart");
  std::fprintf(stderr, "test: rank %d: second model %s the first one's address\n", this_rank,
               first_address == second_address ? "at" : "not at");

  // Setup without an optimizer, then an optimizer set up on its own.
  torch::manual_seed(30 + this_rank);
  PlainNet model;
  fabric.setup(model);
  check(identical_across_ranks(fabric, model), "setup(model) did not broadcast rank 0's weights");
  torch::optim::Adam adam(model.parameters(), 0.01);
  fabric.setup_optimizer(adam);

  // A GAN: two by-value models, each with its own optimizer, backward and step.
  torch::manual_seed(40 + this_rank);
  PlainNet generator;
  PlainNet discriminator;
  auto generator_optimizer = std::make_shared<torch::optim::Adam>(generator.parameters(), 0.01);
  torch::optim::SGD discriminator_optimizer(discriminator.parameters(), 0.05);
  fabric.setup(generator, *generator_optimizer);
  fabric.setup(discriminator, discriminator_optimizer);
  for (int step = 0; step < 3; ++step) {
    torch::manual_seed(400 + 10 * step + this_rank);
    const auto noise = torch::randn({5, 8});
    const auto real = torch::randn({5, 4});
    discriminator_optimizer.zero_grad();
    const auto fake = generator.forward(noise).detach();
    const auto discriminator_loss =
        (discriminator.forward(torch::cat({real, real}, 1)) - discriminator.forward(torch::cat({fake, fake}, 1)))
            .pow(2)
            .mean();
    fabric.backward(discriminator_loss);
    fabric.step(discriminator_optimizer);
    generator_optimizer->zero_grad();
    fabric.backward(generator.forward(noise).pow(2).mean());
    fabric.step(*generator_optimizer);
  }
  check(identical_across_ranks(fabric, generator) && identical_across_ranks(fabric, discriminator),
        "the by-value GAN's models drifted apart");

  // Gradient accumulation and clipping on a by-value model.
  torch::optim::SGD sgd(model.parameters(), 0.1);
  for (int micro = 0; micro < 2; ++micro) {
    torch::manual_seed(600 + 10 * micro + this_rank);
    auto guard = fabric.no_backward_sync(model, /*enabled=*/micro == 0);
    fabric.backward(model.forward(torch::randn({4, 8})).pow(2).sum());
  }
  const auto norm = fabric.clip_gradients(model, sgd, c10::nullopt, 0.5);
  check(torch::equal(fabric.all_reduce(norm, fabric::ReduceOp::Max),
                     fabric.all_reduce(norm, fabric::ReduceOp::Min)),
        "clip_gradients on a by-value model: norms differ across ranks");
  fabric.step(sgd);
  check(identical_across_ranks(fabric, model), "by-value model after no_backward_sync/clip");

  // Checkpoints of a by-value model, and of a State that holds one.
  const std::string path =
      fabric.broadcast(fresh_checkpoint_path("/tmp", "by_value"));
  fabric.save(path, model);
  torch::manual_seed(77 + this_rank);
  PlainNet loaded;
  fabric.load(path, loaded);
  check_same_state(model, loaded, "a by-value model loaded from a by-value save differs");
  int64_t step = 5;
  fabric.save(path, fabric::State{{"model", generator}, {"step", step}});
  int64_t loaded_step = 0;
  fabric.load(path, fabric::State{{"model", loaded}, {"step", loaded_step}});
  check(loaded_step == 5, "State with a by-value model: step");
  check_same_state(generator, loaded, "State with a by-value model: tensors");
  fabric.barrier("by-value checkpoints read");
  if (fabric.is_global_zero()) remove_checkpoint(path);
  fabric.print("by-value checks passed on", fabric.world_size(), "ranks");
  return 0;
}

// A research trainer resumes after fabric.setup(), the way LibTorch code
// does it: torch::load(model, path), or an InputArchive read by the module's
// and the optimizer's own load() (LibTorch reads parameters with set_: new
// storage, where Python's load_state_dict copies in place); or it casts the
// set-up model (->to(kDouble)), or copies a teacher's weights under
// NoGradGuard. --how picks one (rank0_only: only rank 0 loads; copy_rank:
// each rank copies its own values). Every rank trains on its half of one
// global batch per step, 4 steps, never FABRIC_CHECK_SYNC; a plain model on
// the whole batch, resumed the same way, is the reference: the set-up
// model must match it (gradients averaged after the load) on every rank.
int run_replaced(const Arguments& arguments) {
  const std::string& how = arguments.how;
  const std::string dir = arguments.dir.empty() ? std::string("/tmp") : arguments.dir;
  fabric::Fabric fabric(
      fabric::Options().accelerator("cpu").devices(arguments.devices).strategy(arguments.strategy));
  fabric.launch();
  this_rank = fabric.global_rank();
  const int world = fabric.world_size();
  const std::string model_path = fabric.broadcast(fresh_checkpoint_path(dir, "replaced_model"));
  const std::string optimizer_path = model_path + ".optimizer";
  const auto batch = [](int step) {
    torch::manual_seed(700 + step);  // the same global batch on every rank
    auto inputs = torch::randn({8, 8});
    return std::make_pair(inputs, torch::randn({8, 4}));
  };
  // The checkpoint: a model and its Adam after one step, as an earlier run
  // saved them (rank 0 writes; every rank builds the same).
  torch::manual_seed(5);
  Net source;
  torch::optim::Adam source_optimizer(source->parameters(), 0.01);
  {
    const auto [inputs, targets] = batch(-1);
    torch::mse_loss(source->forward(inputs), targets).backward();
    source_optimizer.step();
  }
  if (fabric.is_global_zero()) {
    torch::save(source, model_path);
    torch::save(source_optimizer, optimizer_path);
  }
  fabric.barrier("checkpoint written");

  torch::manual_seed(50 + this_rank);  // the Fabric broadcasts rank 0's values at setup
  Net model;
  torch::optim::Adam optimizer(model->parameters(), 0.01);
  fabric.setup(model, optimizer);
  // The reference: never set up, resumed the same way.
  Net reference;
  torch::optim::Adam reference_optimizer(reference->parameters(), 0.01);
  auto resume = [&](Net& net, torch::optim::Adam& adam, bool set_up) {
    if (how == "torch_load") {
      torch::load(net, model_path);
    } else if (how == "rank0_only") {
      if (!set_up || fabric.is_global_zero()) torch::load(net, model_path);
    } else if (how == "archive") {
      torch::serialize::InputArchive model_archive;
      model_archive.load_from(model_path);
      net->load(model_archive);
      torch::serialize::InputArchive optimizer_archive;
      optimizer_archive.load_from(optimizer_path);
      adam.load(optimizer_archive);
    } else if (how == "to_double") {
      torch::load(net, model_path);  // the same start as the reference's
      net->to(torch::kDouble);
    } else if (how == "copy_same" || how == "copy_rank") {
      torch::NoGradGuard no_grad;
      const auto teacher = source->parameters();
      auto own = net->parameters();
      for (size_t i = 0; i < own.size(); ++i) {
        own[i].copy_(teacher[i] * (how == "copy_rank" && set_up ? 1.0 + this_rank : 1.0));
      }
      for (auto& buffer : net->buffers()) buffer.copy_(source->offset);
    } else {
      fail("unknown --how=" + how);
    }
  };
  resume(model, optimizer, true);
  resume(reference, reference_optimizer, false);
  const auto dtype = how == "to_double" ? torch::kDouble : torch::kFloat;
  const int64_t per_rank = 8 / world;
  for (int step = 0; step < 4; ++step) {
    const auto [inputs, targets] = batch(step);
    optimizer.zero_grad();
    fabric.backward(torch::mse_loss(model->forward(inputs.narrow(0, this_rank * per_rank, per_rank).to(dtype)),
                                    targets.narrow(0, this_rank * per_rank, per_rank).to(dtype)));
    fabric.step(optimizer);
    reference_optimizer.zero_grad();
    torch::mse_loss(reference->forward(inputs.to(dtype)), targets.to(dtype)).backward();
    reference_optimizer.step();
  }
  const double difference = max_relative_difference(*model, *reference);
  std::fprintf(stderr, "test: rank %d: largest relative difference from the 1-process resume %.3g\n", this_rank,
               difference);
  check(difference < 1e-5, how + " after setup: rank " + std::to_string(this_rank) +
                               " differs from the 1-process resume by " + std::to_string(difference) +
                               " (gradients not averaged after the load?)");
  fabric.barrier("replaced done");
  if (fabric.is_global_zero()) {
    std::remove(model_path.c_str());
    std::remove(optimizer_path.c_str());
  }
  fabric.print("replaced scenario (" + how + ") done");
  return 0;
}

}  // namespace fabric_test
