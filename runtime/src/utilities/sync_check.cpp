// See sync_check.h.
#include "utilities/sync_check.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <map>
#include <stdexcept>
#include <utility>

namespace fabric {
namespace detail {

namespace {

// A hash of every byte of the tensor (and of its dtype and size), so that
// values that differ in any bit differ here. Each step of the word loop is
// a bijection of the state, so a single differing word always changes the
// result.
}  // namespace

int64_t hash_of(const at::Tensor& tensor) {
  const at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
  const auto* bytes = static_cast<const unsigned char*>(cpu.data_ptr());
  const size_t size = static_cast<size_t>(cpu.numel()) * cpu.element_size();
  constexpr uint64_t kPrime = 0x100000001b3ULL;
  uint64_t hash =
      0xcbf29ce484222325ULL ^ (static_cast<uint64_t>(cpu.scalar_type()) << 56) ^ static_cast<uint64_t>(cpu.numel());
  size_t at = 0;
  for (; at + 8 <= size; at += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + at, 8);
    hash = (hash ^ word) * kPrime;
    hash ^= hash >> 29;
  }
  for (; at < size; ++at) hash = (hash ^ bytes[at]) * kPrime;
  hash ^= hash >> 32;
  return static_cast<int64_t>(hash);
}

namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

}  // namespace

SyncCheck::SyncCheck(SyncCheckMode mode, Clock clock) : mode_(mode), clock_(std::move(clock)) {
  if (!clock_) {
    clock_ = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  }
}

SyncCheckMode SyncCheck::mode_from_environment() {
  const char* value = std::getenv("FABRIC_CHECK_SYNC");
  if (value == nullptr) return SyncCheckMode::sampled;
  std::string text(value);
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (text.empty()) return SyncCheckMode::sampled;
  if (text == "1" || text == "true" || text == "yes" || text == "on") return SyncCheckMode::every_step;
  if (text == "0" || text == "false" || text == "no" || text == "off") return SyncCheckMode::off;
  throw std::invalid_argument("fabric: FABRIC_CHECK_SYNC='" + std::string(value) +
                              "' is not a valid value: unset it (or set it empty) for the default check, sampled "
                              "before backward passes 1, 2, 4, ... and at the end; 1 (true, yes, on) to compare "
                              "after every fabric.step(); 0 (false, no, off) to turn the check off");
}

std::string SyncCheck::compare(const std::vector<Parameter>& parameters, const AllGather& all_gather, int64_t proposal,
                               std::vector<int64_t>* proposals) {
  const int64_t count = static_cast<int64_t>(parameters.size());
  auto hashes = at::empty({count + 1}, at::kLong);
  auto* values = hashes.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) values[i] = hash_of(parameters[static_cast<size_t>(i)].tensor);
  values[count] = proposal;
  const std::vector<at::Tensor> gathered = all_gather(hashes);
  std::vector<at::Tensor> per_rank;
  for (const auto& tensor : gathered) per_rank.push_back(tensor.to(at::kCPU).contiguous());
  if (proposals != nullptr) {
    proposals->clear();
    for (const auto& tensor : per_rank) {
      if (tensor.numel() > 0) proposals->push_back(tensor.data_ptr<int64_t>()[tensor.numel() - 1]);
    }
  }

  const std::string cause =
      " Parameters must be bit-identical on every rank; something changed "
      "them on some ranks only: an in-place change outside fabric.backward/fabric.step (copy_ or an "
      "assignment under NoGradGuard on some ranks, or with values that differ per rank), "
      "optimizer.step() instead of fabric.step(optimizer) under a sharded strategy, a model "
      "that was not passed to fabric.setup, or a checkpoint loaded on some ranks only (load with "
      "fabric.load(path, state) on every rank).";
  for (int rank = 0; rank < static_cast<int>(per_rank.size()); ++rank) {
    if (per_rank[static_cast<size_t>(rank)].numel() != hashes.numel()) {
      return "rank " + std::to_string(rank) + " compared " +
             std::to_string(per_rank[static_cast<size_t>(rank)].numel() - 1) + " parameter tensors, rank 0 " +
             std::to_string(per_rank.front().numel() - 1) +
             ": the ranks step different optimizers or set up different models.";
    }
  }
  std::vector<std::string> differing;
  std::string first_detail;
  for (int64_t i = 0; i < count; ++i) {
    // Ranks grouped by the value they hold, in order of their first rank.
    std::map<int64_t, std::vector<int>> holders;
    std::vector<int64_t> order;
    for (int rank = 0; rank < static_cast<int>(per_rank.size()); ++rank) {
      const int64_t value = per_rank[static_cast<size_t>(rank)].data_ptr<int64_t>()[i];
      if (holders.count(value) == 0) order.push_back(value);
      holders[value].push_back(rank);
    }
    if (holders.size() == 1) continue;
    differing.push_back("'" + parameters[static_cast<size_t>(i)].name + "'");
    if (first_detail.empty()) {
      for (size_t g = 0; g < order.size(); ++g) {
        const auto& ranks = holders[order[g]];
        first_detail += (g == 0                  ? ""
                         : g + 1 == order.size() ? " and "
                                                 : ", ") +
                        rank_list(ranks) +
                        (g > 0               ? " another"
                         : ranks.size() == 1 ? " holds one value"
                                             : " hold one value");
      }
    }
  }
  if (differing.empty()) return {};
  std::string others;
  if (differing.size() > 1) {
    others = " (" + std::to_string(differing.size() - 1) + " more differ:";
    for (size_t i = 1; i < differing.size() && i < 6; ++i) others += " " + differing[i];
    others += differing.size() > 6 ? " ...)" : ")";
  }
  return "parameter " + differing.front() + " differs between ranks: " + first_detail + others + "." + cause;
}

std::string SyncCheck::after_step(const std::vector<Parameter>& parameters, int world_size,
                                  const AllGather& all_gather) {
  ++steps_;
  for (const auto& parameter : parameters) compared_.insert(parameter.tensor.unsafeGetTensorImpl());
  if (world_size == 1 || !all_gather) return {};
  const std::string body = compare(parameters, all_gather, 0, nullptr);
  if (body.empty()) return {};
  failed_ = true;
  return "fabric: sync check (FABRIC_CHECK_SYNC) failed after step " + std::to_string(steps_) + ": " + body;
}

bool SyncCheck::due_before_backward() {
  if (mode_ != SyncCheckMode::sampled) return false;
  ++backwards_;
  return backwards_ == next_check_;
}

std::string SyncCheck::check_sampled(const std::vector<Parameter>& parameters, const AllGather& all_gather,
                                     bool at_end) {
  const double start = clock_();
  // The next interval this rank proposes: doubling (a change made early is
  // found early), held to ~30 s of training, and never so short that the
  // check costs more than ~0.5% of the time between checks.
  int64_t proposal = std::max<int64_t>(1, 2 * interval_);
  const int64_t passes = backwards_ - checked_at_backward_;
  if (checked_at_backward_ > 0 && passes > 0) {
    const double seconds_per_pass = std::max(1e-9, (start - last_check_end_) / static_cast<double>(passes));
    const auto by_time = static_cast<int64_t>(30.0 / seconds_per_pass);
    const auto by_cost = static_cast<int64_t>(std::ceil(last_check_seconds_ / (0.005 * seconds_per_pass)));
    proposal = std::max<int64_t>({1, std::min(proposal, by_time), by_cost});
  }
  std::vector<int64_t> proposals;
  const std::string body = compare(parameters, all_gather, proposal, &proposals);
  const int64_t checked = backwards_;
  if (!body.empty()) {
    const std::string when = at_end ? "when the Fabric ended (after " + std::to_string(checked) + " backward passes)"
                                    : "before backward pass " + std::to_string(checked);
    const std::string last =
        passed_at_backward_ > 0 ? "; it last passed before backward pass " + std::to_string(passed_at_backward_) : "";
    const std::string outside =
        backwards_ == 0 ? " No fabric.backward() ran in this job: the program trained the set-up model outside the "
                          "Fabric (loss.backward(), optimizer.step()), so no gradient was ever averaged and every "
                          "rank trained its own copy; use fabric.backward(loss) and fabric.step(optimizer)."
                        : "";
    return "fabric: sync check failed " + when + last + ": " + body + outside +
           " (FABRIC_CHECK_SYNC=1 compares after every fabric.step() and names the first step where they "
           "differ.)";
  }
  passed_at_backward_ = checked;
  checked_at_backward_ = checked;
  interval_ =
      std::max<int64_t>(1, proposals.empty() ? proposal : *std::max_element(proposals.begin(), proposals.end()));
  next_check_ = backwards_ + interval_;
  last_check_end_ = clock_();
  last_check_seconds_ = last_check_end_ - start;
  return {};
}

void SyncCheck::record_cost(double seconds) {
  ++checks_run_;
  seconds_checking_ += seconds;
  if (mode_ == SyncCheckMode::sampled) last_check_seconds_ = std::max(last_check_seconds_, seconds);
}

std::string SyncCheck::summary(int world_size) const {
  if (failed_ || mode_ != SyncCheckMode::every_step) return {};
  // Nothing compared is no proof: two separate models would pass.
  const std::string ranks = " on " + std::to_string(world_size) + (world_size == 1 ? " rank" : " ranks");
  if (steps_ == 0)
    return "fabric: sync check: no verdict" + ranks +
           ": no optimizer stepped through fabric.step(optimizer), so nothing was compared. Set the model and "
           "optimizer up with fabric.setup(model, optimizer) and step with fabric.step(optimizer).";
  if (compared_.empty())
    return "fabric: sync check: no verdict" + ranks + ": " + std::to_string(steps_) +
           " steps through fabric.step, but no parameter of a set-up model or optimizer was compared. Pass the "
           "model and its optimizer to fabric.setup(model, optimizer).";
  return "fabric: sync check passed: " + std::to_string(steps_) + " steps, " + std::to_string(compared_.size()) +
         " parameter tensors identical on " + std::to_string(world_size) + " ranks";
}

}  // namespace detail
}  // namespace fabric
