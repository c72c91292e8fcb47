// Stand-in for a header that Debian's libtorch-dev does not ship but that
// LibTorch 1.13's c10d/reducer.hpp includes. It is found through -idirafter,
// so a real copy of the header (pip/conda LibTorch) always wins. reducer.hpp
// only needs these two names; nothing here is defined out of line.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>

namespace torch {
namespace distributed {
namespace autograd {

class DistAutogradContext {
 public:
  using GradCallback = std::function<bool(at::Tensor&)>;
};

using ContextPtr = std::shared_ptr<DistAutogradContext>;

}  // namespace autograd
}  // namespace distributed
}  // namespace torch
