#include <fabric/fabric.h>

#include "c10d_compat.h"
#include "launcher.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <thread>
#include <unordered_set>

#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace fabric {
namespace detail {

namespace {
constexpr size_t kMiB = 1024 * 1024;
// PyTorch DDP's defaults.
constexpr size_t kBroadcastBucketBytes = 250 * kMiB;
constexpr size_t kFirstBucketBytes = 1 * kMiB;
constexpr size_t kBucketBytes = 25 * kMiB;
// barrier(name) compares this many bytes of the names.
constexpr int64_t kBarrierNameBytes = 128;
// all_gather sends each rank's shape in a fixed-size header.
constexpr int64_t kMaxGatherDims = 16;
} // namespace

class FabricState {
 public:
  Options options;
  ProcessPlacement placement;
  torch::Device device{torch::kCPU};
  std::string strategy;  // resolved: "ddp" or "single_device"
  bool launched = false;
  int uncaught_exceptions_at_construction = std::uncaught_exceptions();

  c10::intrusive_ptr<c10d::Store> store;
  c10d_compat::ProcessGroupPtr group;
  // One per set-up model, with the parameters it reduces.
  struct ModelReducer {
    std::vector<at::Tensor> parameters;
    std::unique_ptr<c10d::Reducer> reducer;
  };
  std::vector<ModelReducer> reducers;

  // Runs one collective. When it fails because another rank died, the
  // launcher knows the cause within moments and is already stopping this
  // process with a clear message; the collective's own error (a Gloo
  // "connection closed" trace) would only confuse, so it is swallowed then.
  template <class Function>
  auto collective(Function&& function) -> decltype(function()) {
    try {
      return function();
    } catch (const std::exception&) {
      if (wait_for_known_failure(std::chrono::seconds(3))) wait_for_exit_in_progress();
      throw;
    }
  }

  void require_launched(const char* what) const {
    if (!launched && placement.world_size > 1) {
      throw std::logic_error(std::string("fabric: call launch() before ") + what);
    }
  }
};

std::string temporary_path_for(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

void replace_file(const std::string& temporary, const std::string& path) {
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    remove_file_quietly(temporary);
    throw std::runtime_error("fabric: cannot rename '" + temporary + "' to '" + path +
                             "': " + std::strerror(error));
  }
}

void remove_file_quietly(const std::string& path) { std::remove(path.c_str()); }

} // namespace detail

namespace {

int environment_integer(const char* name, int fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::atoi(text) : fallback;
}

std::string environment_string(const char* name, const std::string& fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::string(text) : fallback;
}

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::Max:
      return c10d::ReduceOp::MAX;
    case ReduceOp::Min:
      return c10d::ReduceOp::MIN;
    case ReduceOp::Sum:
    case ReduceOp::Mean:
      break;
  }
  // Gloo has no AVG: Mean is a sum divided afterwards.
  return c10d::ReduceOp::SUM;
}

} // namespace

Fabric::Fabric(Options options) : state_(std::make_unique<detail::FabricState>()) {
  auto& state = *state_;
  options.override_from_environment();
  state.options = options;

  std::string accelerator = options.accelerator();
  const bool cuda_available = torch::cuda::is_available();
  if (accelerator == "auto") accelerator = cuda_available ? "cuda" : "cpu";
  if (accelerator == "cuda" && !cuda_available) {
    throw std::invalid_argument(
        "fabric: accelerator 'cuda' was requested, but CUDA is not available here (no GPU "
        "visible, or LibTorch built without CUDA). Use 'cpu' or 'auto'.");
  }
  const DeviceSelection& devices = options.devices();
  const int visible = accelerator == "cuda" ? static_cast<int>(torch::cuda::device_count()) : 1;
  if (accelerator == "cuda") {
    if (devices.kind == DeviceSelection::Kind::Count && devices.count > visible) {
      throw std::invalid_argument("fabric: devices=" + std::to_string(devices.count) +
                                  " but only " + std::to_string(visible) +
                                  " CUDA devices are visible");
    }
    for (int id : devices.ids) {
      if (id >= visible) {
        throw std::invalid_argument("fabric: CUDA device " + std::to_string(id) +
                                    " does not exist (" + std::to_string(visible) +
                                    " visible)");
      }
    }
  }
  // On CPU, devices=N means N processes (that is how CPU DDP runs); "auto" and
  // -1 mean one process, since one process already uses every core.
  const int local_processes = devices.process_count(visible);

  auto& placement = state.placement;
  if (auto from_environment = detail::placement_from_environment()) {
    placement = *from_environment;
  } else {
    placement.local_world_size = local_processes;
    placement.num_nodes = options.num_nodes();
    placement.world_size = local_processes * placement.num_nodes;
    placement.node_rank = environment_integer("NODE_RANK", environment_integer("GROUP_RANK", 0));
    placement.global_rank = placement.node_rank * local_processes;
    placement.master_addr = environment_string("MASTER_ADDR", "127.0.0.1");
    placement.master_port = environment_integer("MASTER_PORT", 0);
    if (placement.num_nodes > 1 &&
        (std::getenv("MASTER_ADDR") == nullptr || std::getenv("MASTER_PORT") == nullptr ||
         std::getenv("NODE_RANK") == nullptr)) {
      throw std::invalid_argument(
          "fabric: num_nodes=" + std::to_string(placement.num_nodes) +
          " needs MASTER_ADDR, MASTER_PORT and NODE_RANK in the environment of every node "
          "(or start the job with torchrun or SLURM)");
    }
    if (placement.node_rank < 0 || placement.node_rank >= placement.num_nodes) {
      throw std::invalid_argument("fabric: NODE_RANK=" + std::to_string(placement.node_rank) +
                                  " is outside 0.." + std::to_string(placement.num_nodes - 1));
    }
  }

  if (accelerator == "cuda") {
    const int local_rank = placement.local_rank;
    const int index = local_rank < static_cast<int>(devices.ids.size()) ? devices.ids[local_rank]
                                                                        : local_rank;
    state.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
  }

  state.strategy = options.strategy();
  if (state.strategy == "auto") state.strategy = placement.world_size > 1 ? "ddp" : "single_device";
  if (state.strategy == "single_device" && placement.world_size > 1) {
    throw std::invalid_argument(
        "fabric: strategy 'single_device' runs one process, but the job has " +
        std::to_string(placement.world_size) + " (devices=" + devices.to_string() +
        ", num_nodes=" + std::to_string(placement.num_nodes) + "). Use 'ddp' or 'auto'.");
  }
}

Fabric::~Fabric() {
  auto& state = *state_;
  const bool unwinding = std::uncaught_exceptions() > state.uncaught_exceptions_at_construction;
  // Rank 0 first waits for the ranks it started (they may still use the
  // process group and the store it serves); a failed one ends the process.
  if (state.launched) detail::finish_launch(unwinding);
  try {
    state.reducers.clear();
    state.group.reset();
    state.store.reset();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "fabric: error while shutting down: %s\n", error.what());
  }
}

void Fabric::launch() {
  auto& state = *state_;
  if (state.launched) throw std::logic_error("fabric: launch() was called twice");
  state.launched = true;
  auto& placement = state.placement;
  if (placement.world_size == 1) return;

#ifdef USE_C10D_NCCL
  if (state.device.is_cuda()) c10::cuda::set_device(state.device.index());
#endif
  if (placement.launcher == "fabric") detail::watch_launcher_channel(placement.global_rank);

  // N processes that each start one intra-op thread per core would run
  // N x cores threads and mostly wait on each other; split the cores instead
  // (torchrun sets OMP_NUM_THREADS=1 for the same reason; it wins if set).
  if (environment_string("OMP_NUM_THREADS", "").empty()) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    torch::set_num_threads(std::max(1, cores / placement.local_world_size));
  }

  const bool starts_local_ranks = placement.launcher.empty() && placement.local_world_size > 1;
  auto connect_store = [&] {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<std::uint16_t>(placement.master_port);
    store_options.isServer = placement.global_rank == 0;
    store_options.numWorkers = static_cast<size_t>(placement.world_size);
    // The process group's rendezvous waits for everybody anyway, and rank 0
    // must not block here before it has started the other ranks.
    store_options.waitWorkers = false;
    store_options.timeout = state.options.timeout();
    auto store = c10::make_intrusive<c10d::TCPStore>(placement.master_addr, store_options);
    // Port 0 asks the kernel for a free port; the server knows which it got,
    // with no window in which another program could take it.
    placement.master_port = store->getPort();
    state.store = store;
  };
  if (placement.global_rank == 0) {
    connect_store();
    if (starts_local_ranks) detail::start_local_ranks(placement);
  } else {
    // Another node's local rank 0: start this node's ranks first, so that
    // they connect while this one does.
    if (starts_local_ranks) detail::start_local_ranks(placement);
    state.collective([&] { connect_store(); });
  }

  state.collective([&] {
    if (state.device.is_cuda()) {
#ifdef USE_C10D_NCCL
      state.group = detail::c10d_compat::make_nccl_group(state.store, placement.global_rank,
                                                         placement.world_size,
                                                         state.options.timeout());
      return;
#endif
    }
    detail::c10d_compat::GlooDevice gloo_device;
    if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME")) {
      gloo_device = c10d::ProcessGroupGloo::createDeviceForInterface(interface);
    } else if (placement.num_nodes == 1) {
      gloo_device = c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
    } else {
      gloo_device = c10d::ProcessGroupGloo::createDefaultDevice();
    }
    state.group = detail::c10d_compat::make_gloo_group(state.store, placement.global_rank,
                                                       placement.world_size,
                                                       state.options.timeout(), gloo_device);
  });
  detail::report_joined();
}

torch::Device Fabric::device() const { return state_->device; }
int Fabric::global_rank() const { return state_->placement.global_rank; }
int Fabric::local_rank() const { return state_->placement.local_rank; }
int Fabric::node_rank() const { return state_->placement.node_rank; }
int Fabric::world_size() const { return state_->placement.world_size; }
bool Fabric::is_global_zero() const { return state_->placement.global_rank == 0; }
const Options& Fabric::options() const { return state_->options; }

void Fabric::setup_module(const std::shared_ptr<torch::nn::Module>& module) {
  auto& state = *state_;
  TORCH_CHECK(module != nullptr, "fabric::setup: the model is empty");
  state.require_launched("setup()");
  module->to(state.device);
  if (!state.group) return;

  // Every rank starts from rank 0's weights and buffers, whatever its seed.
  // Detached aliases: broadcast writes into them in place, which autograd
  // would refuse on leaf parameters that require grad.
  std::vector<at::Tensor> module_state;
  std::vector<at::Tensor> trained_parameters;
  for (const auto& parameter : module->parameters()) {
    module_state.push_back(parameter.detach());
    if (parameter.requires_grad()) trained_parameters.push_back(parameter);
  }
  for (const auto& buffer : module->buffers()) module_state.push_back(buffer.detach());

  state.collective([&] {
    // Fails with a clear message when ranks built different models.
    c10d::verify_params_across_processes(state.group, trained_parameters, c10::nullopt);
    if (!module_state.empty()) {
      c10d::broadcast_coalesced(state.group, module_state, detail::kBroadcastBucketBytes, 0);
    }
  });
  if (state.strategy != "ddp" || trained_parameters.empty()) return;

  // As PyTorch's DDP: a small first bucket so that communication starts
  // early, then 25 MiB buckets; both lists reversed because gradients arrive
  // roughly in reverse order of parameter creation.
  auto assignment = c10d::compute_bucket_assignment_by_size(
      trained_parameters, {detail::kFirstBucketBytes, detail::kBucketBytes},
      std::vector<bool>(trained_parameters.size(), false));
  auto bucket_indices = std::move(std::get<0>(assignment));
  auto per_bucket_size_limits = std::move(std::get<1>(assignment));
  std::reverse(bucket_indices.begin(), bucket_indices.end());
  std::reverse(per_bucket_size_limits.begin(), per_bucket_size_limits.end());
  state.collective([&] {
    auto reducer = detail::c10d_compat::make_reducer(
        trained_parameters, std::move(bucket_indices), std::move(per_bucket_size_limits),
        state.group, static_cast<int64_t>(detail::kBucketBytes),
        static_cast<int64_t>(detail::kFirstBucketBytes));
    state.reducers.push_back({std::move(trained_parameters), std::move(reducer)});
  });
}

void Fabric::setup_optimizer(torch::optim::Optimizer& optimizer) {
  // Module::to() moves parameters in place (set_data), so the optimizer's
  // references stay valid; only a check is left to do.
  state_->require_launched("setup()");
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& parameter : group.params()) {
      TORCH_CHECK(parameter.device() == state_->device,
                  "fabric::setup: an optimizer parameter is on ", parameter.device(),
                  " instead of ", state_->device,
                  "; set up the model that owns it with the optimizer");
    }
  }
}

void Fabric::backward(const torch::Tensor& loss, const torch::Tensor& gradient,
                      c10::optional<bool> retain_graph, bool create_graph) {
  auto& state = *state_;
  // With several set-up models (a GAN's generator and discriminator), each
  // loss reaches only some of them; a Reducer armed for a backward that never
  // reaches its parameters would wait for their gradients forever. So only
  // the models whose parameters' grad accumulators this graph reaches.
  std::unordered_set<const torch::autograd::Node*> reached;
  if (!state.reducers.empty() && loss.grad_fn()) {
    std::vector<const torch::autograd::Node*> pending{loss.grad_fn().get()};
    reached.insert(pending.back());
    while (!pending.empty()) {
      const torch::autograd::Node* node = pending.back();
      pending.pop_back();
      for (const auto& edge : node->next_edges()) {
        const torch::autograd::Node* next = edge.function.get();
        if (next != nullptr && reached.insert(next).second) pending.push_back(next);
      }
    }
  }
  auto reaches = [&reached](const detail::FabricState::ModelReducer& model) {
    for (const auto& parameter : model.parameters) {
      const auto accumulator = torch::autograd::impl::try_get_grad_accumulator(parameter);
      if (accumulator && reached.count(accumulator.get()) > 0) return true;
    }
    return false;
  };

  // C++ offers no hook around the user's forward(), where PyTorch's DDP arms
  // its Reducer. Arming it here is equivalent: nothing reaches the Reducer
  // between forward and backward. rebuild_buckets() is a collective that
  // reorders buckets once, after the first backward, by gradient arrival.
  state.collective([&] {
    for (auto& model : state.reducers) {
      if (!reaches(model)) continue;
      model.reducer->prepare_for_forward();
      model.reducer->rebuild_buckets();
      model.reducer->prepare_for_backward({});
    }
    loss.backward(gradient, retain_graph, create_graph);
  });
}

std::ostream& Fabric::print() {
  static std::ostream discard(nullptr);  // no buffer: every write is dropped
  return is_global_zero() ? std::cout : discard;
}

int Fabric::printf(const char* format, ...) {
  if (!is_global_zero()) return 0;
  va_list arguments;
  va_start(arguments, format);
  const int result = std::vprintf(format, arguments);
  va_end(arguments);
  std::fflush(stdout);
  return result;
}

void Fabric::write_to_stdout(const std::string& text) { std::cout << text; }

torch::Tensor Fabric::all_reduce(const torch::Tensor& tensor, ReduceOp op) {
  auto& state = *state_;
  state.require_launched("all_reduce()");
  torch::Tensor result = tensor.detach().to(state.device).clone(at::MemoryFormat::Contiguous);
  if (state.group) {
    std::vector<at::Tensor> tensors{result};
    c10d::AllreduceOptions reduce_options;
    reduce_options.reduceOp = to_c10d(op);
    state.collective([&] { state.group->allreduce(tensors, reduce_options)->wait(); });
  }
  if (op == ReduceOp::Mean) result = result / world_size();
  return result;
}

std::vector<torch::Tensor> Fabric::all_gather(const torch::Tensor& tensor) {
  auto& state = *state_;
  state.require_launched("all_gather()");
  torch::Tensor local = tensor.detach().to(state.device).contiguous();
  if (!state.group) return {local.clone()};

  // Ranks may differ in the first dimension (the last batch of an epoch):
  // exchange shapes, pad to the largest, gather, cut the padding off again.
  const int64_t dims = local.dim();
  TORCH_CHECK(dims <= detail::kMaxGatherDims, "fabric::all_gather: at most ",
              detail::kMaxGatherDims, " dimensions");
  auto header = torch::full({detail::kMaxGatherDims + 2}, -1,
                            torch::TensorOptions().dtype(torch::kLong).device(state.device));
  {
    auto header_cpu = torch::full({detail::kMaxGatherDims + 2}, -1, torch::kLong);
    auto values = header_cpu.accessor<int64_t, 1>();
    values[0] = dims;
    values[1] = static_cast<int64_t>(local.scalar_type());
    for (int64_t d = 0; d < dims; ++d) values[2 + d] = local.size(d);
    header.copy_(header_cpu);
  }
  std::vector<std::vector<at::Tensor>> gathered_headers(1);
  for (int r = 0; r < world_size(); ++r) gathered_headers[0].push_back(torch::empty_like(header));
  std::vector<at::Tensor> header_input{header};
  state.collective([&] { state.group->allgather(gathered_headers, header_input)->wait(); });

  int64_t largest_first_dim = dims > 0 ? local.size(0) : 0;
  std::vector<int64_t> first_dims;
  for (int r = 0; r < world_size(); ++r) {
    auto other = gathered_headers[0][r].cpu();
    auto values = other.accessor<int64_t, 1>();
    bool same = values[0] == dims && values[1] == static_cast<int64_t>(local.scalar_type());
    for (int64_t d = 1; same && d < dims; ++d) same = values[2 + d] == local.size(d);
    if (!same) {
      throw std::runtime_error("fabric::all_gather: rank " + std::to_string(r) +
                               " passed a tensor whose dtype or shape (beyond the first "
                               "dimension) differs from rank " +
                               std::to_string(global_rank()) + "'s " +
                               c10::str(local.sizes(), " ", local.scalar_type()));
    }
    first_dims.push_back(dims > 0 ? values[2] : 0);
    largest_first_dim = std::max(largest_first_dim, first_dims.back());
  }

  torch::Tensor padded = local;
  if (dims > 0 && local.size(0) < largest_first_dim) {
    auto padding_shape = local.sizes().vec();
    padding_shape[0] = largest_first_dim - local.size(0);
    padded = torch::cat({local, torch::zeros(padding_shape, local.options())});
  }
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < world_size(); ++r) outputs[0].push_back(torch::empty_like(padded));
  std::vector<at::Tensor> input{padded};
  state.collective([&] { state.group->allgather(outputs, input)->wait(); });

  std::vector<torch::Tensor> result;
  for (int r = 0; r < world_size(); ++r) {
    result.push_back(dims > 0 ? outputs[0][r].narrow(0, 0, first_dims[r]) : outputs[0][r]);
  }
  return result;
}

torch::Tensor Fabric::broadcast(const torch::Tensor& tensor, int src) {
  auto& state = *state_;
  state.require_launched("broadcast()");
  TORCH_CHECK(src >= 0 && src < world_size(), "fabric::broadcast: src ", src,
              " is not a rank (world size ", world_size(), ")");
  torch::Tensor result = tensor.detach().to(state.device).clone(at::MemoryFormat::Contiguous);
  if (state.group) {
    std::vector<at::Tensor> tensors{result};
    c10d::BroadcastOptions broadcast_options;
    broadcast_options.rootRank = src;
    state.collective([&] { state.group->broadcast(tensors, broadcast_options)->wait(); });
  }
  return result;
}

std::string Fabric::broadcast(const std::string& value, int src) {
  state_->require_launched("broadcast()");
  if (!state_->group) return value;
  const auto length = broadcast(torch::tensor({static_cast<int64_t>(value.size())}), src)
                          .cpu()
                          .item<int64_t>();
  if (length == 0) return {};
  auto bytes = torch::zeros({length}, torch::kUInt8);
  if (global_rank() == src) std::memcpy(bytes.data_ptr<uint8_t>(), value.data(), value.size());
  auto received = broadcast(bytes, src).cpu();
  return std::string(reinterpret_cast<const char*>(received.data_ptr<uint8_t>()),
                     static_cast<size_t>(length));
}

void Fabric::barrier(const std::string& name) {
  auto& state = *state_;
  state.require_launched("barrier()");
  if (!state.group) return;
  // An all-gather of the names is the barrier: it completes only when every
  // rank contributed, and tells whether they all meant the same one.
  auto encoded = torch::zeros({detail::kBarrierNameBytes}, torch::kUInt8);
  std::memcpy(encoded.data_ptr<uint8_t>(), name.data(),
              std::min<size_t>(name.size(), detail::kBarrierNameBytes));
  const auto names = all_gather(encoded);
  auto decode = [](const torch::Tensor& bytes) {
    auto cpu = bytes.cpu();
    const char* data = reinterpret_cast<const char*>(cpu.data_ptr<uint8_t>());
    return std::string(data, strnlen(data, detail::kBarrierNameBytes));
  };
  const std::string mine = decode(encoded);
  bool same = true;
  for (const auto& other : names) same = same && decode(other) == mine;
  if (same) return;
  std::string message = "fabric: ranks reached different barriers (different code paths?):";
  for (size_t r = 0; r < names.size(); ++r) {
    message += " rank " + std::to_string(r) + " at '" + decode(names[r]) + "'";
    if (r + 1 < names.size()) message += ",";
  }
  throw std::runtime_error(message);
}

} // namespace fabric
