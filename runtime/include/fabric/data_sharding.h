// This rank's share of data the program reads itself: loops over batch
// positions, containers of prepared batches, shuffles and permutations the
// program draws, per-rank random streams, and the free functions for code
// that has no Fabric at hand (a loader class of the program's own). See
// docs/runtime.md, "Sharding data the program reads itself".
//
//   for (int64_t i = 0; i < n; i += bs) {...}         // every rank: all of it
//   for (int64_t i : fabric.shard_range(0, n, bs)) {...}   // this rank's share
//
//   for (auto& batch : fabric.shard_elements(batches)) {...}
//   fabric.shuffle(order.begin(), order.end(), rng);   // rank 0's order everywhere
//   auto perm = fabric.randperm(n);                    // the same on every rank
//   { auto per_rank = fabric.per_rank_random(); x = torch::randn({bs, 8}); }
//   indices_ = fabric::shard(std::move(indices_));     // in a loader class
//
// Values are strided across the ranks by their position in the original
// order: position p goes to rank p % world_size. A rank whose share is one
// shorter than the others' gets, at its end, the first value again (the
// padded one) only where the loop has fed a backward pass (training: equal
// step counts on every rank); a loop that has fed none (evaluation) sees
// every value exactly once over all ranks. With one process everything here
// is the original: the same values in the same order, the same draws.
#pragma once

#include <fabric/data.h>
#include <fabric/index_sampler.h>

#include <torch/torch.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace fabric {

class Fabric;

namespace detail {

// std::type_identity (C++20): keeps `end` and `step` out of the deduction
// of shard_range's T, which `begin` alone decides (as the loop variable's
// type does).
template <class T>
struct type_identity {
  using type = T;
};
template <class T>
using type_identity_t = typename type_identity<T>::type;

// What one loop site (the file:line of a shard_range / shard_elements call)
// remembers across its passes: whether one of them has fed a backward pass.
struct ShareSite {
  bool fed_backward = false;
};

// One rank's share of `total` positions, strided over the ranks, and the
// rule that decides whether its padded position is handed out. Built by
// Fabric::shard_range and Fabric::shard_elements.
class Share {
 public:
  Share() = default;
  Share(uint64_t total, uint64_t world, uint64_t rank, std::shared_ptr<ShareSite> site,
        BackwardPassCounter backward_passes)
      : total_(total),
        world_(world),
        rank_(rank),
        real_(total > rank ? (total - rank + world - 1) / world : 0),
        padded_((total + world - 1) / world),
        site_(std::move(site)),
        backward_passes_(std::move(backward_passes)) {}

  uint64_t total() const noexcept { return total_; }
  // This rank's positions without and with the padded one.
  uint64_t real_count() const noexcept { return real_; }
  uint64_t padded_count() const noexcept { return padded_; }
  // The position (0-based in the original order) of this rank's k-th value.
  uint64_t position(uint64_t k) const noexcept { return (rank_ + k * world_) % total_; }

  // A pass starts (the view's begin()).
  void start_pass() const {
    passes_at_start_ = backward_passes_ ? backward_passes_->load() : 0;
    // A rank without a value of its own (fewer values than ranks) never
    // runs the loop's body, so it cannot see a backward pass in it: it
    // takes the padded value when autograd is on (as fabric::shard does),
    // so that a training step is not missing on it.
    pads_without_values_ = real_ == 0 && torch::GradMode::is_enabled();
  }
  // Whether the k-th value is handed out in this pass (decided when the
  // pass reaches it).
  bool hands_out(uint64_t k) const {
    if (k < real_) return true;
    if (k >= padded_) return false;
    return pads();
  }
  // How many values the current pass hands out, as far as known now.
  uint64_t count_now() const { return real_ < padded_ && pads() ? padded_ : real_; }

 private:
  bool pads() const {
    if (site_ && site_->fed_backward) return true;
    if (real_ == 0) return pads_without_values_;
    if (backward_passes_ && backward_passes_->load() != passes_at_start_) {
      if (site_) site_->fed_backward = true;  // sticky: a training loop for good
      return true;
    }
    return false;
  }

  uint64_t total_ = 0;
  uint64_t world_ = 1;
  uint64_t rank_ = 0;
  uint64_t real_ = 0;
  uint64_t padded_ = 0;
  std::shared_ptr<ShareSite> site_;
  BackwardPassCounter backward_passes_;
  mutable uint64_t passes_at_start_ = 0;
  mutable bool pads_without_values_ = false;
};

// The number of values of `for (T i = begin; i < end; i += step)`; throws
// std::invalid_argument naming `step` unless it is positive.
template <class T>
uint64_t range_length(T begin, T end, T step) {
  static_assert(std::is_integral<T>::value && !std::is_same<T, bool>::value && sizeof(T) <= 8,
                "fabric::Fabric::shard_range: the loop variable must be an integer (int, int64_t, size_t...)");
  if (!(step > T(0))) {
    const std::string value = std::is_signed<T>::value ? std::to_string(static_cast<long long>(step))
                                                       : std::to_string(static_cast<unsigned long long>(step));
    throw std::invalid_argument("fabric::Fabric::shard_range: step is " + value +
                                "; it must be positive (shard_range stands for `for (i = begin; i < end; i += step)` "
                                "with step > 0)");
  }
  if (!(begin < end)) return 0;
  // Modulo 2^64: exact for any begin < end of a type of 64 bits or fewer.
  const uint64_t span = static_cast<uint64_t>(end) - static_cast<uint64_t>(begin);
  const uint64_t stride = static_cast<uint64_t>(step);
  return span / stride + (span % stride != 0 ? 1 : 0);
}

// The Fabric's random streams of this rank (src/data_sharding.h).
class PerRankStreams;

// For fabricize verify (FABRIC_VERIFY_RECORD): `share <file>:<line> <total> <mine>`.
void record_share(const char* file, int line, uint64_t total, uint64_t mine);
// The world size of the Fabric launched in this process; 1 when none is and
// the environment names no job of several processes. Throws
// std::logic_error naming `caller` when one does (launch() not called yet).
int launched_world_size(const char* caller);
// fabric::shard's collective through the launched Fabric.
std::vector<int64_t> shard_with_launched_fabric(std::vector<int64_t> order, bool pad, const char* file, int line);

template <class Index>
std::vector<int64_t> to_int64_indices(const std::vector<Index>& indices) {
  static_assert(std::is_integral<Index>::value && !std::is_same<Index, bool>::value,
                "fabric::shard: the elements must be integer indices into the dataset (size_t, int64_t, int...)");
  return std::vector<int64_t>(indices.begin(), indices.end());
}
template <class Index>
std::vector<Index> from_int64_indices(const std::vector<int64_t>& indices) {
  std::vector<Index> result;
  result.reserve(indices.size());
  for (const int64_t index : indices) result.push_back(static_cast<Index>(index));
  return result;
}

}  // namespace detail

// This rank's values of `for (T i = begin; i < end; i += step)`, computed as
// they are needed (no allocation). See Fabric::shard_range.
template <class T>
class ShardRange {
 public:
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = const T&;  // `for (auto& i : range)` compiles, as over a container

    iterator() = default;
    const T& operator*() const {
      value_ = range_->value_at(k_);
      return value_;
    }
    iterator& operator++() {
      ++k_;
      return *this;
    }
    iterator operator++(int) {
      iterator before = *this;
      ++k_;
      return before;
    }
    bool operator==(const iterator& other) const {
      const bool done = at_end();
      const bool other_done = other.at_end();
      return done || other_done ? done == other_done : k_ == other.k_;
    }
    bool operator!=(const iterator& other) const { return !(*this == other); }

   private:
    friend class ShardRange;
    iterator(const ShardRange* range, uint64_t k) : range_(range), k_(k) {}
    bool at_end() const { return range_ == nullptr || !range_->share_.hands_out(k_); }
    const ShardRange* range_ = nullptr;
    uint64_t k_ = 0;
    mutable T value_{};
  };
  using const_iterator = iterator;
  using value_type = T;

  ShardRange(T begin, T step, detail::Share share) : begin_(begin), step_(step), share_(std::move(share)) {}

  // A new pass: whether it hands out the padded value is decided when it
  // gets there.
  iterator begin() const {
    share_.start_pass();
    return iterator(this, 0);
  }
  iterator end() const { return iterator(this, share_.padded_count()); }

  // The loop's values on all ranks together (m = ceil((end - begin) / step)).
  uint64_t total() const noexcept { return share_.total(); }
  // This rank's values without the padded one (what an evaluation pass
  // hands out), and with it (a training pass: ceil(m / world_size)).
  uint64_t real_count() const noexcept { return share_.real_count(); }
  uint64_t padded_count() const noexcept { return share_.padded_count(); }
  // The values a pass hands out as far as known now: padded_count() once
  // this loop site has fed a backward pass, real_count() before.
  size_t size() const { return static_cast<size_t>(share_.count_now()); }
  bool empty() const noexcept { return share_.padded_count() == 0; }
  // This rank's k-th value (k < padded_count()).
  T value_at(uint64_t k) const {
    return static_cast<T>(static_cast<uint64_t>(begin_) + share_.position(k) * static_cast<uint64_t>(step_));
  }

 private:
  T begin_;
  T step_;
  detail::Share share_;
};

// This rank's elements of a random-access container, by reference. See
// Fabric::shard_elements. `Container` is a reference type when the view
// refers to the program's container, a value type when it owns one that was
// passed as an rvalue.
template <class Container>
class ShardElements {
  static constexpr bool kBorrowed = std::is_lvalue_reference<Container>::value;
  using Held = std::remove_reference_t<Container>;
  using Stored = std::conditional_t<kBorrowed, Held*, std::remove_cv_t<Held>>;
  static_assert(
      std::is_base_of<std::random_access_iterator_tag, typename std::iterator_traits<decltype(std::begin(
                                                           std::declval<Held&>()))>::iterator_category>::value,
      "fabric::Fabric::shard_elements: the container must have random access (std::vector, std::deque, "
      "std::array, a C array); copy another one into a std::vector first");

 public:
  template <class View>
  class basic_iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using reference = decltype(std::declval<View&>().element(0));
    using value_type = std::remove_cv_t<std::remove_reference_t<reference>>;
    using difference_type = std::ptrdiff_t;
    using pointer = std::add_pointer_t<std::remove_reference_t<reference>>;

    basic_iterator() = default;
    reference operator*() const { return view_->element(k_); }
    pointer operator->() const { return std::addressof(view_->element(k_)); }
    basic_iterator& operator++() {
      ++k_;
      return *this;
    }
    basic_iterator operator++(int) {
      basic_iterator before = *this;
      ++k_;
      return before;
    }
    bool operator==(const basic_iterator& other) const {
      const bool done = at_end();
      const bool other_done = other.at_end();
      return done || other_done ? done == other_done : k_ == other.k_;
    }
    bool operator!=(const basic_iterator& other) const { return !(*this == other); }

   private:
    friend class ShardElements;
    basic_iterator(View* view, uint64_t k) : view_(view), k_(k) {}
    bool at_end() const { return view_ == nullptr || !view_->share_.hands_out(k_); }
    View* view_ = nullptr;
    uint64_t k_ = 0;
  };
  using iterator = basic_iterator<ShardElements>;
  using const_iterator = basic_iterator<const ShardElements>;

  template <class Argument>
  ShardElements(Argument&& container, detail::Share share)
      : stored_(stored_of(std::forward<Argument>(container))), share_(std::move(share)) {}

  iterator begin() {
    share_.start_pass();
    return iterator(this, 0);
  }
  iterator end() { return iterator(this, share_.padded_count()); }
  const_iterator begin() const {
    share_.start_pass();
    return const_iterator(this, 0);
  }
  const_iterator end() const { return const_iterator(this, share_.padded_count()); }

  // As ShardRange's: all ranks' elements, this rank's without and with the
  // padded one, and what a pass hands out as far as known now.
  uint64_t total() const noexcept { return share_.total(); }
  uint64_t real_count() const noexcept { return share_.real_count(); }
  uint64_t padded_count() const noexcept { return share_.padded_count(); }
  size_t size() const { return static_cast<size_t>(share_.count_now()); }
  bool empty() const noexcept { return share_.padded_count() == 0; }

  // This rank's k-th element (k < padded_count()).
  decltype(auto) element(uint64_t k) { return std::begin(container())[index_of(k)]; }
  decltype(auto) element(uint64_t k) const { return std::begin(container())[index_of(k)]; }
  // The container the view walks (the program's, or the one it owns).
  decltype(auto) container() {
    if constexpr (kBorrowed) {
      return *stored_;
    } else {
      return (stored_);
    }
  }
  decltype(auto) container() const {
    if constexpr (kBorrowed) {
      return *stored_;
    } else {
      return (stored_);
    }
  }

 private:
  template <class Argument>
  static Stored stored_of(Argument&& container) {
    if constexpr (kBorrowed) {
      return std::addressof(container);
    } else {
      return Stored(std::forward<Argument>(container));
    }
  }
  std::ptrdiff_t index_of(uint64_t k) const { return static_cast<std::ptrdiff_t>(share_.position(k)); }

  Stored stored_;
  detail::Share share_;
};

// While alive, LibTorch's default generators (CPU, and this rank's CUDA
// device) draw from this rank's own stream; the stream every rank draws in
// lockstep is put back when it ends. See Fabric::per_rank_random.
class [[nodiscard]] PerRankRandom {
 public:
  PerRankRandom(const PerRankRandom&) = delete;
  PerRankRandom& operator=(const PerRankRandom&) = delete;
  ~PerRankRandom();

 private:
  friend class Fabric;
  // `streams` null: the guard does nothing (one process).
  explicit PerRankRandom(detail::PerRankStreams* streams);
  detail::PerRankStreams* streams_;
};

// ---- without a Fabric at hand ------------------------------------------------
// For code that cannot reach the program's fabric::Fabric (a DataLoader
// class of the program's own, an RL environment): these use the Fabric
// launched in this process. Before one is launched they behave as one
// process (rank 0 of 1, indices unchanged), except in a process that the
// environment places in a job of several (WORLD_SIZE > 1, a launcher's or
// scheduler's variables, or a Fabric of several processes constructed but
// not launched): there they throw std::logic_error saying to construct and
// launch the Fabric first (fabricize puts both at the top of main).
int global_rank();
int world_size();

// Fabric::shard without the Fabric: rank 0's order broadcast (a collective:
// every rank calls it, with as many indices), this rank's strided share
// returned. Padded or not by torch::GradMode: a training loader (autograd
// on) gets equal shares on every rank, an evaluation under
// torch::NoGradGuard counts every index exactly once; `pad` given, as it
// says.
//   indices_ = fabric::shard(std::move(indices_));   // in Loader::reset()
template <class Index>
std::vector<Index> shard(std::vector<Index> indices, bool pad, const char* file = __builtin_FILE(),
                         int line = __builtin_LINE()) {
  if (detail::launched_world_size("fabric::shard") == 1) {
    detail::record_share(file, line, indices.size(), indices.size());
    return indices;
  }
  return detail::from_int64_indices<Index>(
      detail::shard_with_launched_fabric(detail::to_int64_indices(indices), pad, file, line));
}
template <class Index>
std::vector<Index> shard(std::vector<Index> indices, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return shard(std::move(indices), torch::GradMode::is_enabled(), file, line);
}
// The same for a 1-D integer tensor (a torch::randperm order).
torch::Tensor shard(const torch::Tensor& order, bool pad, const char* file = __builtin_FILE(),
                    int line = __builtin_LINE());
torch::Tensor shard(const torch::Tensor& order, const char* file = __builtin_FILE(), int line = __builtin_LINE());

}  // namespace fabric
