// What two ranks compare before they act alike: small vectors of integers
// (a tag, a hash, counts), all-gathered in one collective. Used where every
// rank must rebuild its synchronization at the same backward (a changed or
// replaced set of trained parameters, unused parameters at a model's first
// backward).
#pragma once

#include "utilities/c10d_compat.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace fabric {
namespace detail {

// FNV-1a, 64 bits, fed 64-bit values: the same on every rank that feeds the
// same values.
constexpr uint64_t kFnvOffset = 14695981039346656037ull;
inline void fnv_mix(uint64_t& hash, int64_t value) {
  for (int byte = 0; byte < 8; ++byte) {
    hash ^= static_cast<uint64_t>(value >> (8 * byte)) & 0xffu;
    hash *= 1099511628211ull;
  }
}

// Every rank's `fields` (the same length on every rank), in rank order, by
// one all-gather on `group` through tensors on `device`. A caller that runs
// it inside Collectives::run names the collective for the job monitor.
inline std::vector<std::vector<int64_t>> all_gather_fields(const c10d_compat::ProcessGroupPtr& group,
                                                           const at::Device& device, int world_size,
                                                           const std::vector<int64_t>& fields) {
  auto mine = at::tensor(fields, at::kLong);
  std::vector<at::Tensor> input{mine.to(device)};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int r = 0; r < world_size; ++r) output[0].push_back(at::empty_like(input[0]));
  group->allgather(output, input)->wait();
  std::vector<std::vector<int64_t>> all;
  for (const auto& received : output[0]) {
    const auto values = received.cpu();
    all.emplace_back(values.data_ptr<int64_t>(), values.data_ptr<int64_t>() + values.numel());
  }
  return all;
}

}  // namespace detail
}  // namespace fabric
