// The types the facade (<fabric/fabric.h>) shares with the runtime's
// components: reduce operations, checkpoint state and its error, the
// autocast guard, the seed. The components include this header, never the
// facade.
#pragma once

#include <fabric/data.h>

#include <torch/torch.h>

// LibTorch 2.x's plateau schedule (1.13 has none).
#if __has_include(<torch/optim/schedulers/reduce_on_plateau_scheduler.h>)
#include <torch/optim/schedulers/reduce_on_plateau_scheduler.h>
#define FABRIC_HAS_PLATEAU_SCHEDULER 1
#endif

#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace fabric {

class Fabric;

enum class ReduceOp { Sum, Mean, Max, Min };

namespace detail {
struct LocalGeneratorStates;  // this rank's default generators, as fabric::RandomState saves them
// Path of the temporary file save() writes before renaming it over `path`.
std::string temporary_path_for(const std::string& path);
template <class T, class = void>
struct is_module_holder : std::false_type {};
template <class T>
struct is_module_holder<T, std::void_t<typename T::ContainedType>>
    : std::is_base_of<torch::nn::ModuleHolder<typename T::ContainedType>, T> {};
template <class T>
struct is_module_pointer : std::false_type {};
template <class M>
struct is_module_pointer<std::shared_ptr<M>> : std::is_base_of<torch::nn::Module, M> {};
// A module the program holds by value (`Net model;` with Net deriving from
// torch::nn::Module), not through a ModuleHolder or a pointer.
template <class T>
struct is_plain_module
    : std::integral_constant<bool, std::is_base_of<torch::nn::Module, T>::value && !is_module_holder<T>::value> {};
// Points at a module the program owns (held by value), without owning it:
// no control block, so nothing Fabric keeps extends or ends its life.
inline std::shared_ptr<torch::nn::Module> borrow_module(torch::nn::Module& module) {
  return std::shared_ptr<torch::nn::Module>(std::shared_ptr<torch::nn::Module>(), &module);
}
}  // namespace detail

// What fabric.load (every overload) and fabric.save throw when a checkpoint
// cannot be read or written. LibTorch's torch::load/torch::save throw
// c10::Error, so this is one: `catch (const c10::Error&)` around a load keeps
// working after migration. what() is the message alone (file, what is wrong,
// what to do), without a C++ backtrace.
class CheckpointError : public c10::Error {
 public:
  explicit CheckpointError(const std::string& message);
  // The message alone (LibTorch 1.13's c10::Error appends a newline even
  // without a backtrace).
  const char* what() const noexcept override { return what_without_backtrace(); }
};

// The default random generators of every rank (CPU, and this rank's CUDA
// device where it has one), as a State entry: {"rng", fabric::RandomState()}.
// fabric.save gathers every rank's states into the checkpoint; fabric.load
// gives each rank its own back (a job of another size keeps its generators,
// with a note on rank 0): dropout and random draws continue exactly.
struct RandomState {};

namespace detail {
#ifdef FABRIC_HAS_PLATEAU_SCHEDULER
// ReduceLROnPlateauScheduler keeps its counters private; this adapter
// (checkpoints.cpp) saves and restores them: the best metric, the bad
// epochs, the cooldown and the epoch count.
std::shared_ptr<StatefulEntry> plateau_scheduler_state(torch::optim::ReduceLROnPlateauScheduler& scheduler);
#endif
}  // namespace detail

// One named entry of a checkpoint: a reference to the caller's object, which
// save() reads and load() overwrites in place.
class StateEntry {
 public:
  using Target = std::variant<std::shared_ptr<torch::nn::Module>, torch::optim::Optimizer*, torch::Tensor*, int64_t*,
                              int32_t*, double*, float*, bool*, std::string*, torch::optim::LRScheduler*,
                              detail::StatefulEntry*, RandomState>;

  template <class M>
  StateEntry(std::string name, torch::nn::ModuleHolder<M>& module)
      : name_(std::move(name)), target_(std::shared_ptr<torch::nn::Module>(module.ptr())) {}
  template <class M, class = std::enable_if_t<std::is_base_of<torch::nn::Module, M>::value>>
  StateEntry(std::string name, std::shared_ptr<M>& module)
      : name_(std::move(name)), target_(std::shared_ptr<torch::nn::Module>(module)) {}
  // A module held by value; the State refers to it, as to the other entries.
  template <class M, std::enable_if_t<detail::is_plain_module<M>::value, int> = 0>
  StateEntry(std::string name, M& module) : name_(std::move(name)), target_(detail::borrow_module(module)) {}
  StateEntry(std::string name, torch::optim::Optimizer& optimizer) : name_(std::move(name)), target_(&optimizer) {}
  StateEntry(std::string name, torch::Tensor& tensor) : name_(std::move(name)), target_(&tensor) {}
  StateEntry(std::string name, int64_t& value) : name_(std::move(name)), target_(&value) {}
  StateEntry(std::string name, int32_t& value) : name_(std::move(name)), target_(&value) {}
  StateEntry(std::string name, double& value) : name_(std::move(name)), target_(&value) {}
  StateEntry(std::string name, float& value) : name_(std::move(name)), target_(&value) {}
  StateEntry(std::string name, bool& value) : name_(std::move(name)), target_(&value) {}
  StateEntry(std::string name, std::string& value) : name_(std::move(name)), target_(&value) {}
  // A learning-rate schedule (StepLR...): how many steps it has taken. The
  // learning rates themselves are the optimizer's, saved with it.
  StateEntry(std::string name, torch::optim::LRScheduler& scheduler) : name_(std::move(name)), target_(&scheduler) {}
  // A fabric::DataLoader (`*loader`): its epoch and its place in it; the
  // next pass after fabric.load continues the saved one.
  StateEntry(std::string name, detail::StatefulEntry& object) : name_(std::move(name)), target_(&object) {}
  StateEntry(std::string name, RandomState) : name_(std::move(name)), target_(RandomState()) {}
  // A program's own standard generator (kind "std_generator"): every rank's
  // state, given back to each rank by load (a job of another size keeps its
  // generators, with a note on rank 0).
  StateEntry(std::string name, std::mt19937& engine)
      : name_(std::move(name)),
        adapter_(std::make_shared<detail::EngineState<std::mt19937>>(engine)),
        target_(adapter_.get()) {}
  StateEntry(std::string name, std::mt19937_64& engine)
      : name_(std::move(name)),
        adapter_(std::make_shared<detail::EngineState<std::mt19937_64>>(engine)),
        target_(adapter_.get()) {}
#ifdef FABRIC_HAS_PLATEAU_SCHEDULER
  // LibTorch 2.x's ReduceLROnPlateauScheduler: where its plateau count
  // stands (feed it the reduced metric: fabric.all_reduce). The learning
  // rates are the optimizer's, saved with it.
  StateEntry(std::string name, torch::optim::ReduceLROnPlateauScheduler& scheduler)
      : name_(std::move(name)), adapter_(detail::plateau_scheduler_state(scheduler)), target_(adapter_.get()) {}
#endif

  const std::string& name() const noexcept { return name_; }
  const Target& target() const noexcept { return target_; }
  // "module", "optimizer", "tensor", "int64", "int32", "double", "float",
  // "bool", "string", "scheduler", "loader", "random_state",
  // "plateau_scheduler" or "std_generator": what the checkpoint records for
  // this entry.
  const char* kind() const noexcept;

 private:
  std::string name_;
  // What target_ points to when the entry made it (an adapter).
  std::shared_ptr<detail::StatefulEntry> adapter_;
  Target target_;
};

// The whole training state for save()/load(), in order:
//   fabric::State state{{"model", model}, {"optimizer", optimizer}, {"step", step}};
//   fabric.save("ckpt.pt", state);   ...   fabric.load("ckpt.pt", state);
class State {
 public:
  State() = default;
  // Throws std::invalid_argument on a repeated name.
  State(std::initializer_list<StateEntry> entries);
  State& add(StateEntry entry);
  const std::vector<StateEntry>& entries() const noexcept { return entries_; }

 private:
  std::vector<StateEntry> entries_;
};

// Runs the ops of its scope in the precision's autocast dtype ("bf16-mixed":
// bfloat16; "16-mixed" on CUDA: float16) and restores the previous autocast
// state when it ends. A no-op for the other precisions, and for "16-mixed"
// on CPU, where LibTorch 1.13's autocast has no float16 (the loss scaler
// still runs). See Fabric::autocast.
class [[nodiscard]] Autocast {
 public:
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;
  ~Autocast();

 private:
  friend class Fabric;
  Autocast(bool enabled, c10::DeviceType device_type, at::ScalarType dtype);
  bool enabled_;
  c10::DeviceType device_type_;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

// Sets the seed of LibTorch's generators (CPU and CUDA) and of std::rand,
// and PL_GLOBAL_SEED for processes started later. Returns the seed.
uint64_t seed_everything(uint64_t seed);

}  // namespace fabric
