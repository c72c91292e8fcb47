// Everything that differs between LibTorch 1.13 and 2.x in the c10d API the
// runtime uses, in one place. Only the 1.13 branch is compiled on the
// development machine; the 2.x branches follow PyTorch's sources.
//
//  - 1.13: ProcessGroupGloo/NCCL *are* c10d::ProcessGroups.
//    2.x:  they derive from c10d::Backend; a c10d::ProcessGroup holds them
//          per device type (setBackend) and the Reducer takes the group.
//  - c10d::ProcessGroup's constructor took ProcessGroup::Options up to ~2.5
//    and (store, rank, size) afterwards.
//  - c10d::Reducer: 1.13..2.7 take per_bucket_size_limits after the bucket
//    indices; ~2.8 dropped it and appended skip_all_reduce_unused_params and
//    use_python_reducer; later versions append bucket_bytes_cap_list (and a
//    defaulted batched_grad_copy).
//  - torch::optim::Optimizer::state(): keyed by std::string on 1.13, by
//    void* on 2.x.
//  - c10::Error(message, backtrace): the backtrace is a std::string up to
//    ~2.1, a shared pointer to a lazily computed one afterwards.
//  - With find_unused_parameters, the Reducer before 2.4 ignores which
//    parameters backward passes under no_sync used (PyTorch issue #69031,
//    fixed in 2.4 by PR #124193): see kReducerCountsUsageUnderNoSync.
// Within 2.x the constructor variants are picked by what compiles
// (std::is_constructible), not by version numbers, which are only known
// approximately.
#pragma once

#include <torch/version.h>

#include <ATen/autocast_mode.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
// (1.13's logger.hpp has no include guard: include it here only.)
#include <torch/csrc/distributed/c10d/logger.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <torch/optim/optimizer.h>

#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#define FABRIC_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace fabric {
namespace detail {
namespace c10d_compat {

using ProcessGroupPtr = c10::intrusive_ptr<c10d::ProcessGroup>;
using StorePtr = c10::intrusive_ptr<c10d::Store>;
using GlooDevice = std::shared_ptr<::gloo::transport::Device>;
// c10d::ProcessGroup::Work on 1.13, c10d::Work on 2.x.
using WorkPtr = decltype(std::declval<c10d::ProcessGroup&>().barrier());

#if FABRIC_TORCH_AT_LEAST(2, 0)

template <class Group, class = void>
struct has_set_default_backend : std::false_type {};
template <class Group>
struct has_set_default_backend<
    Group, std::void_t<decltype(std::declval<Group&>().setDefaultBackend(Group::BackendType::GLOO))>> : std::true_type {
};

// A ProcessGroup that routes collectives on `device_type` tensors to `backend`.
template <class Group = c10d::ProcessGroup>
ProcessGroupPtr wrap_backend(const StorePtr& store, int rank, int size, c10::intrusive_ptr<c10d::Backend> backend,
                             c10::DeviceType device_type, typename Group::BackendType backend_type,
                             const std::string& backend_name, std::chrono::milliseconds timeout) {
  c10::intrusive_ptr<Group> group;
  if constexpr (std::is_constructible<Group, const StorePtr&, int, int>::value) {
    group = c10::make_intrusive<Group>(store, rank, size);
  } else {
    auto options = c10::make_intrusive<typename Group::Options>(backend_name, timeout);
    group = c10::make_intrusive<Group>(store, rank, size, options);
  }
  if constexpr (has_set_default_backend<Group>::value) {
    group->setDefaultBackend(backend_type);
  }
  group->setBackend(device_type, backend_type, backend);
  return group;
}

#endif

inline ProcessGroupPtr make_gloo_group(const StorePtr& store, int rank, int size, std::chrono::milliseconds timeout,
                                       GlooDevice device) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(std::move(device));
  auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
#if FABRIC_TORCH_AT_LEAST(2, 0)
  return wrap_backend(store, rank, size, c10::static_intrusive_pointer_cast<c10d::Backend>(gloo), c10::DeviceType::CPU,
                      c10d::ProcessGroup::BackendType::GLOO, "gloo", timeout);
#else
  return gloo;
#endif
}

#ifdef USE_C10D_NCCL
inline ProcessGroupPtr make_nccl_group(const StorePtr& store, int rank, int size, std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
#if FABRIC_TORCH_AT_LEAST(2, 0)
  return wrap_backend(store, rank, size, c10::static_intrusive_pointer_cast<c10d::Backend>(nccl), c10::DeviceType::CUDA,
                      c10d::ProcessGroup::BackendType::NCCL, "nccl", timeout);
#else
  return nccl;
#endif
}
#endif

// The Reducer PyTorch's DistributedDataParallel builds with its defaults
// (gradients copied out of the buckets), with or without the search for
// unused parameters. Gradients as views of the buckets would save two copies
// per step, but LibTorch's Optimizer::zero_grad detaches gradients in place,
// which a view refuses ("Can't detach views in-place"): every user's loop
// would throw.
template <class Reducer = c10d::Reducer>
std::unique_ptr<Reducer> make_reducer(std::vector<at::Tensor> params, std::vector<std::vector<size_t>> bucket_indices,
                                      std::vector<size_t> per_bucket_size_limits, ProcessGroupPtr group,
                                      int64_t bucket_bytes_cap, int64_t first_bucket_bytes_cap,
                                      bool find_unused_parameters,
                                      std::unordered_map<size_t, std::string> param_names) {
  std::vector<bool> expect_sparse_gradients(params.size(), false);
  constexpr bool gradient_as_bucket_view = false;
  using Tensors = std::vector<at::Tensor>;
  using Buckets = std::vector<std::vector<size_t>>;
  using Names = std::unordered_map<size_t, std::string>;
  if constexpr (std::is_constructible<Reducer, Tensors, Buckets, std::vector<size_t>, ProcessGroupPtr,
                                      std::vector<bool>, int64_t, bool, bool, Names, int64_t>::value) {
    // 1.13 .. ~2.7
    return std::make_unique<Reducer>(std::move(params), std::move(bucket_indices), std::move(per_bucket_size_limits),
                                     std::move(group), std::move(expect_sparse_gradients), bucket_bytes_cap,
                                     find_unused_parameters, gradient_as_bucket_view, std::move(param_names),
                                     first_bucket_bytes_cap);
  } else if constexpr (std::is_constructible<Reducer, Tensors, Buckets, ProcessGroupPtr, std::vector<bool>, int64_t,
                                             bool, bool, Names, int64_t, bool, bool>::value) {
    // ~2.8: the Reducer re-derives the size limits from the caps.
    return std::make_unique<Reducer>(std::move(params), std::move(bucket_indices), std::move(group),
                                     std::move(expect_sparse_gradients), bucket_bytes_cap, find_unused_parameters,
                                     gradient_as_bucket_view, std::move(param_names), first_bucket_bytes_cap,
                                     /*skip_all_reduce_unused_params=*/false,
                                     /*use_python_reducer=*/false);
  } else {
    // Newer: an explicit list of bucket caps, first bucket first.
    std::vector<int64_t> bucket_bytes_cap_list{first_bucket_bytes_cap, bucket_bytes_cap};
    return std::make_unique<Reducer>(std::move(params), std::move(bucket_indices), std::move(group),
                                     std::move(expect_sparse_gradients), bucket_bytes_cap, find_unused_parameters,
                                     gradient_as_bucket_view, std::move(param_names), first_bucket_bytes_cap,
                                     /*skip_all_reduce_unused_params=*/false,
                                     /*use_python_reducer=*/false, std::move(bucket_bytes_cap_list));
  }
}

// Whether the Reducer (find_unused_parameters) counts a parameter as used
// when a backward that it was not prepared for (under no_sync) reached it.
// Before 2.4 its autograd hook returned before recording that, so a
// parameter used only in the accumulated micro-batches, and in no
// synchronized backward on any rank, kept each rank's own gradient; Fabric
// averages those itself there (DdpStrategy::after_backward).
constexpr bool kReducerCountsUsageUnderNoSync = FABRIC_TORCH_AT_LEAST(2, 4);

// torch::optim::Optimizer::state() is keyed by the parameter's TensorImpl:
// 1.13 by its address printed as a string (c10::guts::to_string), 2.x by
// the address itself (void*). The key type is read off the map.
template <class Optimizer = torch::optim::Optimizer>
auto optimizer_state_key(const Optimizer& optimizer, const at::Tensor& parameter) {
  using Key = typename std::decay_t<decltype(optimizer.state())>::key_type;
  if constexpr (std::is_same<Key, std::string>::value) {
    std::ostringstream text;  // what c10::guts::to_string does
    text << parameter.unsafeGetTensorImpl();
    return Key(text.str());
  } else {
    return Key(parameter.unsafeGetTensorImpl());
  }
}

// A c10::Error whose what() is `message` alone. 1.13..2.1 take the backtrace
// as a string; later versions as a lazily computed shared pointer (null:
// none).
template <class Error = c10::Error>
Error error_without_backtrace(std::string message) {
  if constexpr (std::is_constructible<Error, std::string, std::string>::value) {
    return Error(std::move(message), std::string());
  } else {
    return Error(std::move(message), nullptr);
  }
}

}  // namespace c10d_compat

// Autocast switches: 1.13 has one pair of functions per device kind
// (set_enabled/set_autocast_gpu_dtype for CUDA, set_cpu_enabled/
// set_autocast_cpu_dtype for CPU); 2.4+ takes the device type.
namespace autocast_compat {
#if FABRIC_TORCH_AT_LEAST(2, 4)
inline bool is_enabled(c10::DeviceType device) { return at::autocast::is_autocast_enabled(device); }
inline void set_enabled(c10::DeviceType device, bool on) { at::autocast::set_autocast_enabled(device, on); }
inline at::ScalarType dtype(c10::DeviceType device) { return at::autocast::get_autocast_dtype(device); }
inline void set_dtype(c10::DeviceType device, at::ScalarType type) { at::autocast::set_autocast_dtype(device, type); }
#else
inline bool is_enabled(c10::DeviceType device) {
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
inline void set_enabled(c10::DeviceType device, bool on) {
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(on);
  } else {
    at::autocast::set_cpu_enabled(on);
  }
}
inline at::ScalarType dtype(c10::DeviceType device) {
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
}
inline void set_dtype(c10::DeviceType device, at::ScalarType type) {
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(type);
  } else {
    at::autocast::set_autocast_cpu_dtype(type);
  }
}
#endif
}  // namespace autocast_compat
}  // namespace detail
}  // namespace fabric
