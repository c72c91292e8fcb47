// Collectives of fabric::Fabric: all_reduce (tensors and scalars),
// all_gather of tensors of any shape, broadcast (tensors, strings), named
// barriers and shard()'s broadcast of an index order, each through
// FabricState::collective (the JobMonitor's scope and the messages for a
// dead rank, a lost node or a timeout).
#include <fabric/fabric.h>

#include "fabric_state.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <unordered_set>

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

}  // namespace detail

torch::Tensor Fabric::all_reduce(const torch::Tensor& tensor, ReduceOp op) {
  auto& state = *state_;
  state.require_launched("all_reduce()");
  torch::Tensor result = tensor.detach().to(state.device).clone(at::MemoryFormat::Contiguous);
  if (state.group) {
    std::vector<at::Tensor> tensors{result};
    c10d::AllreduceOptions reduce_options;
    reduce_options.reduceOp = detail::to_c10d(op);
    state.collective("fabric.all_reduce()", [&] { state.group->allreduce(tensors, reduce_options)->wait(); });
  }
  if (op == ReduceOp::Mean) result = result / world_size();
  return result;
}

double Fabric::all_reduce_double(double value, ReduceOp op) {
  return all_reduce(torch::tensor(value, torch::kDouble), op).cpu().item<double>();
}

int64_t Fabric::all_reduce_integer(int64_t value, ReduceOp op) {
  return all_reduce(torch::tensor(value, torch::kLong), op).cpu().item<int64_t>();
}

void Fabric::check_integer_reduction(ReduceOp op, const char* what) {
  if (op != ReduceOp::Mean) return;
  throw std::invalid_argument(std::string("fabric::all_reduce: ReduceOp::Mean of ") + what +
                              " would not be one: pass a double (or float) to average, or reduce with "
                              "ReduceOp::Sum and divide by the total count yourself");
}

void Fabric::throw_integer_overflow(const char* why) {
  throw std::overflow_error(std::string("fabric::all_reduce: integers are reduced as int64_t; ") + why +
                            ". Reduce a double instead");
}

std::vector<torch::Tensor> Fabric::all_gather(const torch::Tensor& tensor) {
  auto& state = *state_;
  state.require_launched("all_gather()");
  torch::Tensor local = tensor.detach().to(state.device).contiguous();
  if (!state.group) return {local.clone()};

  // Ranks may differ in the first dimension (the last batch of an epoch):
  // exchange shapes, pad to the largest, gather, cut the padding off again.
  const int64_t dims = local.dim();
  TORCH_CHECK(dims <= detail::kMaxGatherDims, "fabric::all_gather: at most ", detail::kMaxGatherDims, " dimensions");
  auto header =
      torch::full({detail::kMaxGatherDims + 2}, -1, torch::TensorOptions().dtype(torch::kLong).device(state.device));
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
  state.collective("fabric.all_gather()", [&] { state.group->allgather(gathered_headers, header_input)->wait(); });

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
  state.collective("fabric.all_gather()", [&] { state.group->allgather(outputs, input)->wait(); });

  std::vector<torch::Tensor> result;
  for (int r = 0; r < world_size(); ++r) {
    result.push_back(dims > 0 ? outputs[0][r].narrow(0, 0, first_dims[r]) : outputs[0][r]);
  }
  return result;
}

torch::Tensor Fabric::broadcast(const torch::Tensor& tensor, int src) {
  auto& state = *state_;
  state.require_launched("broadcast()");
  TORCH_CHECK(src >= 0 && src < world_size(), "fabric::broadcast: src ", src, " is not a rank (world size ",
              world_size(), ")");
  torch::Tensor result = tensor.detach().to(state.device).clone(at::MemoryFormat::Contiguous);
  if (state.group) {
    std::vector<at::Tensor> tensors{result};
    c10d::BroadcastOptions broadcast_options;
    broadcast_options.rootRank = src;
    state.collective("fabric.broadcast()", [&] { state.group->broadcast(tensors, broadcast_options)->wait(); });
  }
  return result;
}

std::string Fabric::broadcast(const std::string& value, int src) {
  state_->require_launched("broadcast()");
  if (!state_->group) return value;
  detail::FabricState::MonitorScope scope(state_->monitor.get(), "fabric.broadcast()");
  const auto length = broadcast(torch::tensor({static_cast<int64_t>(value.size())}), src).cpu().item<int64_t>();
  if (length == 0) return {};
  auto bytes = torch::zeros({length}, torch::kUInt8);
  if (global_rank() == src) std::memcpy(bytes.data_ptr<uint8_t>(), value.data(), value.size());
  auto received = broadcast(bytes, src).cpu();
  return std::string(reinterpret_cast<const char*>(received.data_ptr<uint8_t>()), static_cast<size_t>(length));
}

std::vector<int64_t> Fabric::broadcast_shard_order(std::vector<int64_t> order) {
  auto& state = *state_;
  state.require_launched("shard()");
  if (!state.group) return order;
  const auto options = torch::TensorOptions().dtype(torch::kLong).device(state.device);
  // The lengths first, gathered rather than broadcast, so that a rank whose
  // list differs from rank 0's (another dataset, another filter) makes every
  // rank throw the same error instead of sharding someone else's indices.
  std::vector<std::vector<at::Tensor>> lengths(1);
  for (int r = 0; r < world_size(); ++r) lengths[0].push_back(torch::empty({1}, options));
  std::vector<at::Tensor> my_length{torch::full({1}, static_cast<int64_t>(order.size()), options)};
  state.collective("fabric.shard()", [&] { state.group->allgather(lengths, my_length)->wait(); });
  const int64_t length = lengths[0][0].cpu().item<int64_t>();
  std::string differing;
  for (int r = 1; r < world_size(); ++r) {
    const int64_t other = lengths[0][static_cast<size_t>(r)].cpu().item<int64_t>();
    if (other != length) {
      differing +=
          (differing.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " has " + std::to_string(other);
    }
  }
  if (!differing.empty()) {
    throw std::invalid_argument("fabric::shard: every rank must pass the indices of the same dataset, but rank 0 has " +
                                std::to_string(length) + " indices and " + differing +
                                ". Build the index list from the same dataset on every rank (shard broadcasts rank 0's "
                                "order and gives each rank its share of it)");
  }
  if (length == 0) return order;
  auto values = torch::empty({length}, torch::kLong);
  if (global_rank() == 0) std::memcpy(values.data_ptr<int64_t>(), order.data(), order.size() * sizeof(int64_t));
  std::vector<at::Tensor> tensors{values.to(state.device)};
  c10d::BroadcastOptions broadcast_options;
  broadcast_options.rootRank = 0;
  state.collective("fabric.shard()", [&] { state.group->broadcast(tensors, broadcast_options)->wait(); });
  const auto received = tensors[0].cpu();
  std::memcpy(order.data(), received.data_ptr<int64_t>(), order.size() * sizeof(int64_t));
  return order;
}

void Fabric::barrier(const std::string& name) {
  auto& state = *state_;
  state.require_launched("barrier()");
  if (!state.group) return;
  // The name goes into the monitor's messages: ranks in a barrier while
  // others are in another collective are told apart by it.
  detail::FabricState::MonitorScope scope(state.monitor.get(),
                                          state.monitor ? state.monitor->label_for_barrier(name) : "fabric.barrier()");
  // An all-gather of the names is the barrier: it completes only when every
  // rank contributed, and tells whether they all meant the same one.
  auto encoded = torch::zeros({detail::kBarrierNameBytes}, torch::kUInt8);
  std::memcpy(encoded.data_ptr<uint8_t>(), name.data(), std::min<size_t>(name.size(), detail::kBarrierNameBytes));
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

}  // namespace fabric
