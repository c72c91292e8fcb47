// FABRIC_CHECK_SYNC=1: proof that the ranks train one model.
//
// Under DDP (and the sharded strategies, after fabric.step's broadcast) the
// parameters are bit-identical on every rank after each optimizer step.
// With the variable set, every fabric.step(optimizer) hashes each parameter
// tensor of that optimizer and of the set-up models (every byte) and
// all-gathers the hashes; a difference ends the job with a message naming
// the step, the parameter and which ranks disagree (printed by rank 0; every
// rank exits with code 1). At the end, global rank
// 0 prints one line that tests and users can look for:
//   fabric: sync check passed: <S> steps, <P> parameter tensors identical on <W> ranks
// or, where no step or no parameter was compared, a line that says there is
// no verdict (and why): passing on nothing would announce two separate
// models as checked.
// Off (the default), none of this runs: Fabric reads the variable once.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

namespace fabric {
namespace detail {

class SyncCheck {
 public:
  // Whether FABRIC_CHECK_SYNC asks for the check ("1", "true", "yes", "on").
  static bool requested();

  struct Parameter {
    std::string name;  // for messages: its name in its model, or its place in the optimizer
    at::Tensor tensor;
  };
  // One all-gather of a tensor: every rank's tensor, in rank order (the
  // first dimension may differ between ranks).
  using AllGather = std::function<std::vector<at::Tensor>(const at::Tensor&)>;

  // After fabric.step() on every rank. With one process (`all_gather`
  // empty) it only counts. Returns, on every rank, the message that ends
  // the job when the ranks hold different values (or different numbers of
  // parameters); empty when they agree.
  std::string after_step(const std::vector<Parameter>& parameters, int world_size, const AllGather& all_gather);
  // The line rank 0 prints at the end; empty after a failed check.
  std::string summary(int world_size) const;

 private:
  int64_t steps_ = 0;
  // Identities of the tensors compared so far (never dereferenced).
  std::unordered_set<const void*> compared_;
  bool failed_ = false;
};

}  // namespace detail
}  // namespace fabric
