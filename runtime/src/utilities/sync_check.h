// The sync check: proof that the ranks train one model, on by default.
//
// Under DDP (and the sharded strategies, after fabric.step's broadcast) the
// parameters are bit-identical on every rank after each optimizer step.
// A check hashes each parameter tensor of the set-up models (every byte) and
// all-gathers the hashes; a difference ends the job with a message naming
// the step, the parameter and which ranks disagree (printed by rank 0; every
// rank exits with code 1). FABRIC_CHECK_SYNC chooses how often:
//   unset or empty   sampled (the default): before backward passes 1, 3, 7,
//                    15, ... (the interval doubles), at most ~30 s apart, and
//                    never so often that
//                    checking costs more than ~0.5% of the time between
//                    checks; once more when the Fabric ends.
//                    Several ranks only; silent when the ranks agree.
//   1/true/yes/on    after every fabric.step(optimizer), the optimizer's
//                    parameters too; at the end rank 0 prints
//                      fabric: sync check passed: <S> steps, <P> parameter tensors identical on <W> ranks
//                    or a line saying there is no verdict (and why).
//   0/false/no/off   off.
// Sampled checks sit before a backward pass, not after fabric.step, so that
// an optimizer stepped directly (fine under ddp) is covered too; every rank
// runs the same number of backward passes, so every rank agrees on which
// ones compare. The interval is the largest any rank proposes, carried in
// the same all-gather as the hashes: ranks never disagree on it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

namespace fabric {
namespace detail {

// A hash of every byte of the tensor (and of its dtype and size): values
// that differ in any bit differ here.
int64_t hash_of(const at::Tensor& tensor);

enum class SyncCheckMode { off, sampled, every_step };

class SyncCheck {
 public:
  // FABRIC_CHECK_SYNC read; std::invalid_argument (listing the values) for
  // anything else.
  static SyncCheckMode mode_from_environment();

  // Seconds on a monotonic clock (tests give their own).
  using Clock = std::function<double()>;
  explicit SyncCheck(SyncCheckMode mode, Clock clock = {});
  SyncCheckMode mode() const { return mode_; }

  struct Parameter {
    std::string name;  // for messages: its name in its model, or its place in the optimizer
    at::Tensor tensor;
  };
  // One all-gather of a tensor: every rank's tensor, in rank order (the
  // first dimension may differ between ranks).
  using AllGather = std::function<std::vector<at::Tensor>(const at::Tensor&)>;

  // every_step: after fabric.step() on every rank. With one process
  // (`all_gather` empty) it only counts. Returns, on every rank, the message
  // that ends the job when the ranks hold different values (or different
  // numbers of parameters); empty when they agree.
  std::string after_step(const std::vector<Parameter>& parameters, int world_size, const AllGather& all_gather);
  // The line rank 0 prints at the end (every_step); empty after a failed
  // check and in the other modes.
  std::string summary(int world_size) const;

  // sampled: counts a backward pass; whether a check runs before it.
  bool due_before_backward();
  // sampled: whether backward passes ran since the last check, or none ran
  // at all (a program that trained outside the Fabric: loss.backward() and
  // optimizer.step() on a set-up model leave the ranks apart).
  bool due_at_end() const {
    return mode_ == SyncCheckMode::sampled && (backwards_ > checked_at_backward_ || backwards_ == 0);
  }
  // sampled: one check, before the current backward pass or at the end.
  // Returns the message that ends the job (the same on every rank), or empty.
  std::string check_sampled(const std::vector<Parameter>& parameters, const AllGather& all_gather, bool at_end);

  // sampled: the backward passes before which a check runs, from 1 (tests).
  int64_t next_check() const { return next_check_; }

  // One check's whole wall time, as its caller measured it (under fsdp the
  // parameters' gathers too): counted, and under sampled the basis of the
  // next interval when it exceeds what the comparison alone took.
  void record_cost(double seconds);
  int64_t checks_run() const { return checks_run_; }
  double seconds_checking() const { return seconds_checking_; }

 private:
  // Compares this rank's hashes with every other rank's; `proposal` rides
  // along and `proposals` receives every rank's. Returns the message's
  // body (what differs and why), or empty.
  std::string compare(const std::vector<Parameter>& parameters, const AllGather& all_gather, int64_t proposal,
                      std::vector<int64_t>* proposals);

  SyncCheckMode mode_;
  // every_step
  int64_t steps_ = 0;
  // Identities of the tensors compared so far (never dereferenced).
  std::unordered_set<const void*> compared_;
  bool failed_ = false;
  // sampled
  int64_t backwards_ = 0;
  int64_t next_check_ = 1;
  int64_t interval_ = 1;
  int64_t checked_at_backward_ = 0;  // 0: none yet
  int64_t passed_at_backward_ = 0;
  Clock clock_;
  double last_check_end_ = 0;
  double last_check_seconds_ = 0;
  int64_t checks_run_ = 0;
  double seconds_checking_ = 0;
};

}  // namespace detail
}  // namespace fabric
