// The hand-written DDP loop the benchmarks measure Fabric against: PyTorch
// DDP's recipe driven directly on c10d (what a careful LibTorch user writes
// without Fabric). A Gloo process group of its own, next to the Fabric's,
// parameters broadcast from rank 0, the Reducer's bucket assignment as
// DistributedDataParallel computes it (1 MiB first bucket, then 25 MiB).
#pragma once

#include <fabric/fabric.h>

#include "utilities/c10d_compat.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace fabric_bench {

inline fabric::detail::c10d_compat::ProcessGroupPtr own_group(fabric::Fabric& fabric) {
  c10d::TCPStoreOptions options;
  options.isServer = fabric.is_global_zero();
  options.numWorkers = static_cast<size_t>(fabric.world_size());
  options.waitWorkers = false;
  options.timeout = std::chrono::minutes(5);
  c10::intrusive_ptr<c10d::TCPStore> store;
  std::string port;
  if (fabric.is_global_zero()) {
    options.port = 0;
    store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
    port = std::to_string(store->getPort());
  }
  port = fabric.broadcast(port);
  if (!fabric.is_global_zero()) {
    options.port = static_cast<std::uint16_t>(std::stoi(port));
    store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  }
  return fabric::detail::c10d_compat::make_gloo_group(
      store, fabric.global_rank(), fabric.world_size(), std::chrono::minutes(5),
      c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
}

// One module's parameters under a c10d::Reducer: call before_forward() and
// before_backward() around the forward pass, then loss.backward() all-reduces
// the gradients in buckets as they are produced.
class HandReducer {
 public:
  HandReducer(fabric::Fabric& fabric, std::vector<at::Tensor> parameters)
      : group_(own_group(fabric)) {
    std::vector<at::Tensor> detached;
    for (const auto& parameter : parameters) detached.push_back(parameter.detach());
    c10d::broadcast_coalesced(group_, detached, 250u << 20, 0);
    const size_t first_cap = 1u << 20, cap = 25u << 20;
    auto assignment = c10d::compute_bucket_assignment_by_size(
        parameters, {first_cap, cap}, std::vector<bool>(parameters.size(), false));
    auto bucket_indices = std::get<0>(assignment);
    auto limits = std::get<1>(assignment);
    std::reverse(bucket_indices.begin(), bucket_indices.end());
    std::reverse(limits.begin(), limits.end());
    reducer_ = fabric::detail::c10d_compat::make_reducer(
        parameters, bucket_indices, limits, group_, static_cast<int64_t>(cap),
        static_cast<int64_t>(first_cap), /*find_unused_parameters=*/false, /*param_names=*/{});
  }
  void before_forward() {
    reducer_->prepare_for_forward();
    reducer_->rebuild_buckets();
  }
  void before_backward() { reducer_->prepare_for_backward({}); }
  const fabric::detail::c10d_compat::ProcessGroupPtr& group() const { return group_; }

 private:
  fabric::detail::c10d_compat::ProcessGroupPtr group_;
  std::unique_ptr<c10d::Reducer> reducer_;
};

} // namespace fabric_bench
