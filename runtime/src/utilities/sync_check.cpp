// See sync_check.h.
#include "utilities/sync_check.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>

namespace fabric {
namespace detail {

namespace {

// A hash of every byte of the tensor (and of its dtype and size), so that
// values that differ in any bit differ here. Each step of the word loop is
// a bijection of the state, so a single differing word always changes the
// result.
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

std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

}  // namespace

bool SyncCheck::requested() {
  const char* value = std::getenv("FABRIC_CHECK_SYNC");
  if (value == nullptr) return false;
  std::string text(value);
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text == "1" || text == "true" || text == "yes" || text == "on";
}

std::string SyncCheck::after_step(const std::vector<Parameter>& parameters, int world_size,
                                  const AllGather& all_gather) {
  ++steps_;
  for (const auto& parameter : parameters) compared_.insert(parameter.tensor.unsafeGetTensorImpl());
  if (world_size == 1 || !all_gather) return {};

  auto hashes = at::empty({static_cast<int64_t>(parameters.size())}, at::kLong);
  auto* values = hashes.data_ptr<int64_t>();
  for (size_t i = 0; i < parameters.size(); ++i) values[i] = hash_of(parameters[i].tensor);
  const std::vector<at::Tensor> gathered = all_gather(hashes);
  std::vector<at::Tensor> per_rank;
  for (const auto& tensor : gathered) per_rank.push_back(tensor.to(at::kCPU).contiguous());

  const std::string step = "after step " + std::to_string(steps_);
  const std::string cause =
      " Parameters must be bit-identical on every rank after each step; something changed "
      "them on some ranks only: an in-place change outside fabric.backward/fabric.step, "
      "optimizer.step() instead of fabric.step(optimizer) under a sharded strategy, a model "
      "that was not passed to fabric.setup, or a checkpoint loaded on some ranks only.";
  for (int rank = 0; rank < static_cast<int>(per_rank.size()); ++rank) {
    if (per_rank[static_cast<size_t>(rank)].numel() != hashes.numel()) {
      failed_ = true;
      return std::string("fabric: sync check (FABRIC_CHECK_SYNC) failed " + step + ": rank " + std::to_string(rank) +
                         " compared " + std::to_string(per_rank[static_cast<size_t>(rank)].numel()) +
                         " parameter tensors, rank 0 " + std::to_string(per_rank.front().numel()) +
                         ": the ranks step different optimizers or set up different models.");
    }
  }
  std::vector<std::string> differing;
  std::string first_detail;
  for (size_t i = 0; i < parameters.size(); ++i) {
    // Ranks grouped by the value they hold, in order of their first rank.
    std::map<int64_t, std::vector<int>> holders;
    std::vector<int64_t> order;
    for (int rank = 0; rank < static_cast<int>(per_rank.size()); ++rank) {
      const int64_t value = per_rank[static_cast<size_t>(rank)].data_ptr<int64_t>()[i];
      if (holders.count(value) == 0) order.push_back(value);
      holders[value].push_back(rank);
    }
    if (holders.size() == 1) continue;
    differing.push_back("'" + parameters[i].name + "'");
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
  failed_ = true;
  std::string others;
  if (differing.size() > 1) {
    others = " (" + std::to_string(differing.size() - 1) + " more differ:";
    for (size_t i = 1; i < differing.size() && i < 6; ++i) others += " " + differing[i];
    others += differing.size() > 6 ? " ...)" : ")";
  }
  return "fabric: sync check (FABRIC_CHECK_SYNC) failed " + step + ": parameter " + differing.front() +
         " differs between ranks: " + first_detail + others + "." + cause;
}

std::string SyncCheck::summary(int world_size) const {
  if (failed_) return {};
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
