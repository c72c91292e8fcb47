// fabric::Options: how a Fabric runs (accelerator, devices, nodes, strategy,
// precision, timeout). Setters validate at once and throw
// std::invalid_argument with the valid values and the nearest match.
#pragma once

#include <fabric/cluster_environment.h>
#include <fabric/loggers.h>

#include <chrono>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace fabric {

// Which devices this node uses, as the user wrote it. Resolved against the
// accelerator when the Fabric is constructed.
struct DeviceSelection {
  enum class Kind {
    Auto,        // "auto": CPU -> 1 process, CUDA -> every visible GPU
    AllVisible,  // -1 / "-1": CPU -> 1 process, CUDA -> every visible GPU
    Count,       // n >= 1 processes on this node
    Ids,         // explicit device indices, one process each
  };
  Kind kind = Kind::Auto;
  int count = 0;         // Kind::Count only
  std::vector<int> ids;  // Kind::Ids only

  // Number of processes on this node given how many devices are visible
  // (CPU: pass 1; a CPU "count" still spawns that many processes).
  int process_count(int visible_devices) const;
  // "auto", "-1", "2" or "0,2"; parse_devices(to_string()) round-trips.
  std::string to_string() const;
};

// Parses "auto", "-1", "2", "0,2", "1," (a one-element list), "[0, 2]".
// Throws std::invalid_argument on anything else.
DeviceSelection parse_devices(const std::string& spec);

class Options {
 public:
  Options() = default;

  // The names `option` ("accelerator", "strategy" or "precision") accepts,
  // aliases after the names they stand for, in the order the setters' errors
  // list them; fabricize's help shows them. Throws std::invalid_argument
  // for another option.
  static std::vector<std::string> accepted_values(const std::string& option);

  // "cpu" | "cuda" | "gpu" (= "cuda") | "auto"
  Options& accelerator(std::string value);
  // n >= 1, or -1 for every visible device (on CPU: 1 process).
  Options& devices(int count);
  // "auto", "-1", "2", "0,2"
  Options& devices(std::string spec);
  Options& devices(std::vector<int> ids);
  // devices({0, 2}) picks this overload (a braced list would otherwise be
  // ambiguous between std::string and std::vector<int>).
  Options& devices(std::initializer_list<int> ids);
  Options& num_nodes(int count);
  // "ddp" | "auto" | "single_device" (alias "single-device") | "zero2"
  // (aliases "zero", "deepspeed", "deepspeed_stage_2": optimizer state and
  // gradients sharded across ranks) | "zero1" (alias "deepspeed_stage_1":
  // optimizer state sharded) | "fsdp" (aliases "zero3",
  // "deepspeed_stage_3": parameters sharded too). The offloading names
  // ("fsdp_cpu_offload", ...) are refused with what to use instead.
  // Lightning's "ddp_find_unused_parameters_true" is "ddp" plus
  // find_unused_parameters(true) ("..._false": plus false); the plain names
  // leave find_unused_parameters as it was.
  Options& strategy(std::string value);
  // "32-true" (alias "32"), "64-true" ("64"), "16-mixed" ("16"),
  // "bf16-mixed" ("bf16"), "16-true", "bf16-true"
  Options& precision(std::string value);
  // The loss scaler of "16-mixed" (PyTorch's GradScaler defaults).
  struct GradScalerOptions {
    double init_scale = 65536.0;
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int growth_interval = 2000;  // steps without inf/NaN before the scale grows
  };
  Options& grad_scaler(GradScalerOptions value) {
    grad_scaler_ = value;
    return *this;
  }
  const GradScalerOptions& grad_scaler() const noexcept { return grad_scaler_; }
  // Rendezvous and collective timeout; default 30 minutes. A collective
  // that waits longer for another rank throws std::runtime_error saying so.
  Options& timeout(std::chrono::milliseconds value);
  // DDP (and "zero1"/"zero2"): the gradient bucket size in MiB (PyTorch's
  // default 25; the first bucket stays at most 1 MiB), must be > 0.
  Options& bucket_cap_mb(double value);
  // DDP (and "zero1"): parameters that a backward may not reach are marked
  // ready by a graph search before each backward, as PyTorch's
  // find_unused_parameters=True (costs a traversal per step); a parameter
  // unused on every rank keeps its gradient, one used on some ranks gets the
  // average over all. Without it, a backward that does not reach every
  // trained parameter throws before it runs, naming the parameters; left
  // unset, a set of parameters that the first backward reaches on no rank
  // (a backbone's unused head) turns the search on for that model, said
  // once by rank 0.
  Options& find_unused_parameters(bool value) {
    find_unused_parameters_ = value;
    return *this;
  }

  // "fsdp": the auto-wrap policy (Lightning's min_num_params). Modules are
  // visited children first; one whose parameters that no descendant unit
  // took number at least this many becomes a unit (all-gathered before its
  // forward and backward, released after, gradients reduced as its backward
  // ends); what is left forms the model's last unit. Default 1,000,000.
  Options& fsdp_min_num_params(int64_t value);
  // "fsdp": how fabric.save(path, state) writes. "sharded" (the default, as
  // Lightning's): `path` is a directory in which every rank writes the
  // parameters and optimizer state it owns, read back on any number of
  // ranks by fabric.load; "full": one file, the format the other
  // strategies write (every parameter gathered on every rank while rank 0
  // writes it). fabric.save(path, model) always writes one file: the
  // consolidated export that plain torch::load reads.
  Options& fsdp_state_dict_type(const std::string& value);

  // Where log()/log_dict() write (rank 0 only), e.g.
  //   .loggers({std::make_shared<fabric::CSVLogger>("logs")})  or
  //   .logger(fabric::TensorBoardLogger("logs"))  (adds one).
  Options& loggers(std::vector<std::shared_ptr<Logger>> value) {
    loggers_ = std::move(value);
    return *this;
  }
  template <class L, class = std::enable_if_t<std::is_base_of<Logger, std::decay_t<L>>::value>>
  Options& logger(L&& value) {
    loggers_.push_back(std::make_shared<std::decay_t<L>>(std::forward<L>(value)));
    return *this;
  }

  // Where a process started by a scheduler or launcher that Fabric does not
  // know (PBS, LSF, MPICH's Hydra) reads its place in the job: see
  // fabric/cluster_environment.h. Tried before the ones Fabric knows
  // (torchrun, SLURM, Open MPI); when it detects nothing, Fabric says so on
  // standard error and goes on as without it (those, else its own launcher).
  // nullptr removes it.
  Options& cluster_environment(std::shared_ptr<ClusterEnvironment> value) {
    cluster_environment_ = std::move(value);
    return *this;
  }

  // Applies Lightning's CLI variables when they are set: LT_ACCELERATOR,
  // LT_DEVICES, LT_STRATEGY, LT_PRECISION, LT_NUM_NODES. They override what
  // the code chose. The Fabric constructor calls this.
  Options& override_from_environment();

  // Canonical values: accelerator "cpu"/"cuda"/"auto"; strategy
  // "auto"/"ddp"/"single_device"/"zero1"/"zero2"/"fsdp"; precision "32-true", "64-true",
  // "16-mixed", "bf16-mixed", "16-true", "bf16-true".
  const std::string& accelerator() const noexcept { return accelerator_; }
  const DeviceSelection& devices() const noexcept { return devices_; }
  int num_nodes() const noexcept { return num_nodes_; }
  const std::string& strategy() const noexcept { return strategy_; }
  const std::string& precision() const noexcept { return precision_; }
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  double bucket_cap_mb() const noexcept { return bucket_cap_mb_; }
  bool find_unused_parameters() const noexcept { return find_unused_parameters_.value_or(false); }
  // Whether the code or a strategy name ("ddp_find_unused_parameters_false")
  // chose it, either way.
  bool find_unused_parameters_chosen() const noexcept { return find_unused_parameters_.has_value(); }
  int64_t fsdp_min_num_params() const noexcept { return fsdp_min_num_params_; }
  const std::string& fsdp_state_dict_type() const noexcept { return fsdp_state_dict_type_; }
  const std::vector<std::shared_ptr<Logger>>& loggers() const noexcept { return loggers_; }
  const std::shared_ptr<ClusterEnvironment>& cluster_environment() const noexcept { return cluster_environment_; }

 private:
  std::string accelerator_ = "auto";
  DeviceSelection devices_;
  int num_nodes_ = 1;
  std::string strategy_ = "auto";
  std::string precision_ = "32-true";
  std::chrono::milliseconds timeout_ = std::chrono::minutes(30);
  double bucket_cap_mb_ = 25.0;
  std::optional<bool> find_unused_parameters_;
  int64_t fsdp_min_num_params_ = 1000000;
  std::string fsdp_state_dict_type_ = "sharded";
  std::vector<std::shared_ptr<Logger>> loggers_;
  std::shared_ptr<ClusterEnvironment> cluster_environment_;
  GradScalerOptions grad_scaler_;
};

}  // namespace fabric
