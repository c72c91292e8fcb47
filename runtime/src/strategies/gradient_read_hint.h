// Between fabric.backward and fabric.step under zero2 and fsdp a rank holds
// only its share of the gradients: .grad() of a parameter it owns none of is
// undefined there, and code that reads gradients by hand (a norm for a log)
// then fails inside LibTorch with "Expected a proper Tensor but got None",
// which does not say why. While a hint is armed, the first operator given an
// undefined tensor as its first argument (it is about to fail so) makes it
// say why on standard error, once per process.
#pragma once

#include <cstdint>
#include <string>

namespace fabric {
namespace detail {

class GradientReadHint {
 public:
  // `strategy`: the strategy's name, for the message.
  explicit GradientReadHint(std::string strategy) : strategy_(std::move(strategy)) {}
  ~GradientReadHint() { disarm(); }
  GradientReadHint(const GradientReadHint&) = delete;
  GradientReadHint& operator=(const GradientReadHint&) = delete;

  // The gradients are shares from now on (after the reduction to owners).
  void arm();
  // They are not (fabric.step, the next backward): operators are no longer
  // watched.
  void disarm();

 private:
  std::string strategy_;
  // The RecordFunction callback's at::CallbackHandle (0: none). ATen's
  // record_function.h stays out of this header: its .cpp is compiled with
  // NDEBUG (as LibTorch was) and the headers that include this one are not.
  uint64_t handle_ = 0;
};

}  // namespace detail
}  // namespace fabric
