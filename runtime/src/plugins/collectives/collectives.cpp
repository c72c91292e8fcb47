// See collectives.h.
#include "plugins/collectives/collectives.h"

#include "utilities/seed.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace fabric {

namespace detail {

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

Collectives::Collectives(ProcessPlacement placement, std::chrono::milliseconds timeout, torch::Device device)
    : placement_(std::move(placement)), timeout_(timeout), device_(device) {}

Collectives::~Collectives() {
  // The monitor's watchdog first (it uses the store), then the group.
  monitor_.reset();
  group_.reset();
  store_.reset();
}

void Collectives::explain_failure(const char* what, const std::string& message) {
  if (monitor_) {
    // Gloo found data of another size: the ranks are in different
    // collectives. The monitor finds out where each one is, says so and
    // ends the job (this call does not return then).
    if (JobMonitor::is_mismatch_error(message)) monitor_->collective_failed(message);
    // Another rank is ending the job for that reason (its exit closed
    // this collective's connections): its message, not this error.
    monitor_->stop_if_job_is_stopping();
  }
  const bool timed_out =
      message.find("Timed out") != std::string::npos || message.find("timed out") != std::string::npos;
  // A rank that died makes the collective fail at once (connection
  // closed), and the launcher's message follows within moments; a
  // timeout has waited long enough already.
  const auto patience = timed_out ? std::chrono::milliseconds(0) : std::chrono::seconds(3);
  if (wait_for_known_failure(patience)) wait_for_exit_in_progress();
  const std::string error_line = first_line_of(message);
  if (timed_out) {
    throw std::runtime_error(std::string("fabric: ") + what + " on rank " + std::to_string(placement_.global_rank) +
                             " timed out after " + std::to_string(timeout_.count()) +
                             " ms (Options::timeout): another rank did not join it in time; it is stuck, far "
                             "slower, or on a different code path" +
                             (placement_.num_nodes > 1
                                  ? ", or the network between the nodes failed (ranks on other nodes: " +
                                        layout_.describe_other_nodes(placement_.node_rank) + ")"
                                  : std::string()) +
                             ". Collective error: " + error_line);
  }
  // A whole node gone (killed, out of memory, powered off): no launcher
  // here saw its ranks end, so say which node this rank lost.
  if (placement_.num_nodes > 1) {
    const std::string lost = describe_lost_peer(layout_, placement_, message);
    if (!lost.empty()) {
      throw std::runtime_error(std::string("fabric: ") + what + " on rank " + std::to_string(placement_.global_rank) +
                               " (node " + std::to_string(placement_.node_rank) + ") failed: " + lost +
                               ". Its processes ended (killed, out of memory, a crash, the machine went down) or "
                               "the network to it failed; the job cannot go on: restart it on every node (from "
                               "the last checkpoint). Collective error: " +
                               error_line);
    }
  }
}

void Collectives::connect(bool starts_local_ranks) {
  const ProcessPlacement& placement = placement_;
  if (placement.global_rank == 0) {
    open_store();
    if (starts_local_ranks) start_local_ranks(placement_);
  } else {
    // Another node's local rank 0: start this node's ranks first, so that
    // they connect while this one does.
    if (starts_local_ranks) start_local_ranks(placement_);
    run("a collective", [&] { open_store(); });
  }
  run("a collective", [&] { make_process_group(); });
  run("a collective", [&] { agree_on_default_generator(*store_, placement.global_rank, timeout_); });
  start_monitor(starts_local_ranks);
}

std::chrono::milliseconds Collectives::store_connect_deadline() const {
  // The store client's own connect timeout applies first (it retries until
  // rank 0 listens); this deadline only ends a connection nobody answers.
  return timeout_ + std::chrono::seconds(5);
}

void Collectives::open_store() {
  auto& placement = placement_;
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(placement.master_port);
  store_options.isServer = placement.global_rank == 0;
  store_options.numWorkers = static_cast<size_t>(placement.world_size);
  // The process group's rendezvous waits for everybody anyway, and rank 0
  // must not block here before it has started the other ranks.
  store_options.waitWorkers = false;
  store_options.timeout = timeout_;
  // Rank 0 serves the store on the address the ranks connect to only
  // (loopback for a single-node job), not on every interface.
  BindScope bind_scope(store_options.isServer ? store_bind_address(placement) : "");
  const std::string where = placement.master_addr + ":" + std::to_string(placement.master_port);
  c10::intrusive_ptr<c10d::TCPStore> store;
  try {
    store = store_options.isServer
                ? c10::make_intrusive<c10d::TCPStore>(placement.master_addr, store_options)
                : connect_store_client(placement.master_addr, store_options, store_connect_deadline());
  } catch (const std::exception& error) {
    const std::string cause = first_line_of(error.what());
    if (store_options.isServer) {
      throw std::runtime_error(
          "fabric: rank 0 cannot serve the rendezvous store on " + where + " (MASTER_ADDR:MASTER_PORT): " + cause +
          (placement.master_port != 0 ? " Another program may hold the port: choose a free MASTER_PORT, or leave it "
                                        "unset (single node) and Fabric picks one."
                                      : ""));
    }
    throw std::runtime_error("fabric: rank " + std::to_string(placement.global_rank) +
                             " cannot reach the rendezvous store of rank 0 at " + where +
                             " (MASTER_ADDR:MASTER_PORT) within " + std::to_string(timeout_.count()) +
                             " ms (Options::timeout): " + cause);
  }
  // Port 0 asks the kernel for a free port; the server knows which it got,
  // with no window in which another program could take it.
  placement.master_port = store->getPort();
  bound_store_connections(placement.master_port, timeout_);
  store_ = store;
}

void Collectives::make_process_group() {
  const ProcessPlacement& placement = placement_;
  const GlooAddress address = gloo_address(placement);
  layout_ = check_job(*store_, placement, timeout_, address.address);
  if (device_.is_cuda()) {
#ifdef USE_C10D_NCCL
    // NCCL's bootstrap picks its own interface; across nodes, the one
    // that reaches node 0 unless the user named one.
    if (placement.num_nodes > 1 && std::getenv("NCCL_SOCKET_IFNAME") == nullptr) {
      const std::string interface = interface_with_address(address.address);
      if (!interface.empty()) ::setenv("NCCL_SOCKET_IFNAME", interface.c_str(), 0);
    }
    group_ = c10d_compat::make_nccl_group(store_, placement.global_rank, placement.world_size, timeout_);
    return;
#endif
  }
  c10d_compat::GlooDevice gloo_device;
  try {
    gloo_device = address.interface.empty() ? c10d::ProcessGroupGloo::createDeviceForHostname(address.address)
                                            : c10d::ProcessGroupGloo::createDeviceForInterface(address.interface);
  } catch (const std::exception& error) {
    throw std::runtime_error("fabric: rank " + std::to_string(placement.global_rank) +
                             " cannot open Gloo's network device on " +
                             (address.interface.empty() ? address.address : address.interface) + " (" + address.why +
                             "): " + first_line_of(error.what()));
  }
  group_ = c10d_compat::make_gloo_group(store_, placement.global_rank, placement.world_size, timeout_, gloo_device);
}

void Collectives::start_monitor(bool starts_local_ranks) {
  const ProcessPlacement& placement = placement_;
  // The JobMonitor's watchdog gets a store connection of its own.
  JobMonitor::Config monitor_config;
  monitor_config.rank = placement.global_rank;
  monitor_config.world_size = placement.world_size;
  monitor_config.supervised = placement.launcher == "fabric" || starts_local_ranks;
  c10::intrusive_ptr<c10d::Store> watchdog_store = run("a collective", [&] {
    c10d::TCPStoreOptions client_options;
    client_options.port = static_cast<std::uint16_t>(placement.master_port);
    client_options.isServer = false;
    client_options.numWorkers = static_cast<size_t>(placement.world_size);
    client_options.waitWorkers = false;
    client_options.timeout = timeout_;
    auto client = connect_store_client(placement.master_addr, client_options, store_connect_deadline());
    bound_store_connections(placement.master_port, timeout_);
    return c10::intrusive_ptr<c10d::Store>(client);
  });
  monitor_ = std::make_unique<JobMonitor>(monitor_config, store_, std::move(watchdog_store));
}

at::Tensor Collectives::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  require_launched("all_reduce()");
  at::Tensor result = tensor.detach().to(device_).clone(at::MemoryFormat::Contiguous);
  if (group_) {
    std::vector<at::Tensor> tensors{result};
    c10d::AllreduceOptions reduce_options;
    reduce_options.reduceOp = to_c10d(op);
    run("fabric.all_reduce()", [&] { group_->allreduce(tensors, reduce_options)->wait(); });
  }
  if (op == ReduceOp::Mean) result = result / placement_.world_size;
  return result;
}

std::vector<at::Tensor> Collectives::all_gather(const at::Tensor& tensor) {
  require_launched("all_gather()");
  torch::Tensor local = tensor.detach().to(device_).contiguous();
  if (!group_) return {local.clone()};

  // Ranks may differ in the first dimension (the last batch of an epoch):
  // exchange shapes, pad to the largest, gather, cut the padding off again.
  const int64_t dims = local.dim();
  TORCH_CHECK(dims <= kMaxGatherDims, "fabric::all_gather: at most ", kMaxGatherDims, " dimensions");
  auto header = torch::full({kMaxGatherDims + 2}, -1, torch::TensorOptions().dtype(torch::kLong).device(device_));
  {
    auto header_cpu = torch::full({kMaxGatherDims + 2}, -1, torch::kLong);
    auto values = header_cpu.accessor<int64_t, 1>();
    values[0] = dims;
    values[1] = static_cast<int64_t>(local.scalar_type());
    for (int64_t d = 0; d < dims; ++d) values[2 + d] = local.size(d);
    header.copy_(header_cpu);
  }
  std::vector<std::vector<at::Tensor>> gathered_headers(1);
  for (int r = 0; r < placement_.world_size; ++r) gathered_headers[0].push_back(torch::empty_like(header));
  std::vector<at::Tensor> header_input{header};
  run("fabric.all_gather()", [&] { group_->allgather(gathered_headers, header_input)->wait(); });

  int64_t largest_first_dim = dims > 0 ? local.size(0) : 0;
  std::vector<int64_t> first_dims;
  for (int r = 0; r < placement_.world_size; ++r) {
    auto other = gathered_headers[0][r].cpu();
    auto values = other.accessor<int64_t, 1>();
    bool same = values[0] == dims && values[1] == static_cast<int64_t>(local.scalar_type());
    for (int64_t d = 1; same && d < dims; ++d) same = values[2 + d] == local.size(d);
    if (!same) {
      throw std::runtime_error("fabric::all_gather: rank " + std::to_string(r) +
                               " passed a tensor whose dtype or shape (beyond the first "
                               "dimension) differs from rank " +
                               std::to_string(placement_.global_rank) + "'s " +
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
  for (int r = 0; r < placement_.world_size; ++r) outputs[0].push_back(torch::empty_like(padded));
  std::vector<at::Tensor> input{padded};
  run("fabric.all_gather()", [&] { group_->allgather(outputs, input)->wait(); });

  std::vector<at::Tensor> result;
  for (int r = 0; r < placement_.world_size; ++r) {
    result.push_back(dims > 0 ? outputs[0][r].narrow(0, 0, first_dims[r]) : outputs[0][r]);
  }
  return result;
}

at::Tensor Collectives::broadcast(const at::Tensor& tensor, int src) {
  require_launched("broadcast()");
  TORCH_CHECK(src >= 0 && src < placement_.world_size, "fabric::broadcast: src ", src, " is not a rank (world size ",
              placement_.world_size, ")");
  at::Tensor result = tensor.detach().to(device_).clone(at::MemoryFormat::Contiguous);
  if (group_) {
    std::vector<at::Tensor> tensors{result};
    c10d::BroadcastOptions broadcast_options;
    broadcast_options.rootRank = src;
    run("fabric.broadcast()", [&] { group_->broadcast(tensors, broadcast_options)->wait(); });
  }
  return result;
}

std::string Collectives::broadcast(const std::string& value, int src) {
  require_launched("broadcast()");
  if (!group_) return value;
  MonitorScope monitor_scope(monitor_.get(), "fabric.broadcast()");
  const auto length = broadcast(torch::tensor({static_cast<int64_t>(value.size())}), src).cpu().item<int64_t>();
  if (length == 0) return {};
  auto bytes = torch::zeros({length}, torch::kUInt8);
  if (placement_.global_rank == src) std::memcpy(bytes.data_ptr<uint8_t>(), value.data(), value.size());
  auto received = broadcast(bytes, src).cpu();
  return std::string(reinterpret_cast<const char*>(received.data_ptr<uint8_t>()), static_cast<size_t>(length));
}

std::vector<int64_t> Collectives::broadcast_order(std::vector<int64_t> order, const char* call) {
  const bool shuffle = std::strcmp(call, "fabric.shuffle()") == 0;
  require_launched(shuffle ? "shuffle()" : "shard()");
  if (!group_) return order;
  const auto options = torch::TensorOptions().dtype(torch::kLong).device(device_);
  // The lengths first, gathered rather than broadcast, so that a rank whose
  // list differs from rank 0's (another dataset, another filter) makes every
  // rank throw the same error instead of sharding someone else's indices.
  std::vector<std::vector<at::Tensor>> lengths(1);
  for (int r = 0; r < placement_.world_size; ++r) lengths[0].push_back(torch::empty({1}, options));
  std::vector<at::Tensor> my_length{torch::full({1}, static_cast<int64_t>(order.size()), options)};
  run(call, [&] { group_->allgather(lengths, my_length)->wait(); });
  const int64_t length = lengths[0][0].cpu().item<int64_t>();
  std::string differing;
  for (int r = 1; r < placement_.world_size; ++r) {
    const int64_t other = lengths[0][static_cast<size_t>(r)].cpu().item<int64_t>();
    if (other != length) {
      differing +=
          (differing.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " has " + std::to_string(other);
    }
  }
  if (!differing.empty() && shuffle) {
    throw std::invalid_argument(
        "fabric.shuffle: every rank must shuffle as many elements (the same data, in the same order), but rank 0 "
        "has " +
        std::to_string(length) + " and " + differing +
        ". Build the sequence alike on every rank (shuffle puts every rank's elements in rank 0's order)");
  }
  if (!differing.empty()) {
    throw std::invalid_argument("fabric::shard: every rank must pass the indices of the same dataset, but rank 0 has " +
                                std::to_string(length) + " indices and " + differing +
                                ". Build the index list from the same dataset on every rank (shard broadcasts rank 0's "
                                "order and gives each rank its share of it)");
  }
  if (length == 0) return order;
  auto values = torch::empty({length}, torch::kLong);
  if (placement_.global_rank == 0)
    std::memcpy(values.data_ptr<int64_t>(), order.data(), order.size() * sizeof(int64_t));
  std::vector<at::Tensor> tensors{values.to(device_)};
  c10d::BroadcastOptions broadcast_options;
  broadcast_options.rootRank = 0;
  run(call, [&] { group_->broadcast(tensors, broadcast_options)->wait(); });
  const auto received = tensors[0].cpu();
  std::memcpy(order.data(), received.data_ptr<int64_t>(), order.size() * sizeof(int64_t));
  return order;
}

void Collectives::barrier(const std::string& name) {
  require_launched("barrier()");
  if (!group_) return;
  // The name goes into the monitor's messages: ranks in a barrier while
  // others are in another collective are told apart by it.
  MonitorScope monitor_scope(monitor_.get(), monitor_ ? monitor_->label_for_barrier(name) : "fabric.barrier()");
  // An all-gather of the names is the barrier: it completes only when every
  // rank contributed, and tells whether they all meant the same one.
  auto encoded = torch::zeros({kBarrierNameBytes}, torch::kUInt8);
  std::memcpy(encoded.data_ptr<uint8_t>(), name.data(), std::min<size_t>(name.size(), kBarrierNameBytes));
  const auto names = all_gather(encoded);
  auto decode = [](const torch::Tensor& bytes) {
    auto cpu = bytes.cpu();
    const char* data = reinterpret_cast<const char*>(cpu.data_ptr<uint8_t>());
    return std::string(data, strnlen(data, kBarrierNameBytes));
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

}  // namespace detail
}  // namespace fabric
