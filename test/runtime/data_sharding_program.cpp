// Issue 37: the runtime's primitives for data the program reads itself
// (fabric/data_sharding.h), on real ranks (Gloo, TCPStore on 127.0.0.1).
//
//   data_sharding_program checks --devices=N
//       shard_range (strided, padded where a backward pass was fed, exact
//       in evaluation, sticky per loop site, fewer values than ranks, no
//       values, signed and unsigned, step > 1, invalid steps),
//       shard_elements (a vector of structs modified through the view, const
//       containers, an rvalue container owned by the view, deque, array, C
//       array), shuffle (rank 0's order; with one process std::shuffle bit
//       for bit, the generator where std::shuffle leaves it; lengths that
//       differ: an error on every rank), randperm, shard of tensors, the
//       free functions (fabric::shard padded by GradMode, global_rank,
//       world_size), per_rank_random (per-rank draws inside, the shared
//       stream in lockstep after, even when ranks drew different amounts;
//       continuing across scopes; nested; nothing with one process), a
//       second launched Fabric refused.
//   data_sharding_program before_launch
//       fabric::shard, fabric::global_rank and fabric::world_size before any
//       Fabric: with WORLD_SIZE=2 each throws std::logic_error (printed,
//       exit code 3); without, one process (exit code 0).
//   data_sharding_program duplicate --devices=N --data=same|sharded|constant [--steps=S]
//       trains a small model on the same batches on every rank, on sharded
//       batches, or with a constant loss; rank 0 prints the duplicate-data
//       line (or not: the driver counts it) and the check's measured cost.
//   data_sharding_program random_resume --devices=N --dir=D --phase=full|first|second [--inside=1]
//       per-rank and shared draws over 6 steps; first: 3 steps then a
//       fabric::State with a RandomState saved (--inside: while a
//       per_rank_random guard lives); second: loaded, then steps 3-5. Each
//       rank writes its draws to D/<phase>_rank<R>.txt.
//   data_sharding_program records --devices=N --dir=D
//       (FABRIC_VERIFY_RECORD=D) the `share` lines of fabricize verify.
//
// Prints "data sharding: <scenario> passed on N ranks" on rank 0, or
// "CHECK FAILED ..." and exits 1.
#include <fabric/fabric.h>

#include <ATen/CPUGeneratorImpl.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

int this_rank = -1;

[[noreturn]] void fail(const std::string& what) {
  const std::string line = "CHECK FAILED on rank " + std::to_string(this_rank) + ": " + what + "\n";
  std::fputs(line.c_str(), stderr);
  std::exit(1);
}

void check(bool condition, const std::string& what) {
  if (!condition) fail(what);
}

template <class Function>
std::string error_of(Function&& function) {
  try {
    function();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "";
}

void check_error(const std::string& error, const std::string& expected, const std::string& what) {
  check(!error.empty(), what + ": no exception");
  check(error.find(expected) != std::string::npos, what + ": the message '" + error + "' lacks '" + expected + "'");
}

struct Arguments {
  std::string scenario;
  int devices = 2;
  std::string data = "same";
  int steps = 40;
  std::string dir;
  std::string phase;
  bool inside = false;
};

Arguments parse_arguments(int argc, char** argv) {
  Arguments arguments;
  if (argc > 1) arguments.scenario = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string argument = argv[i];
    const auto equals = argument.find('=');
    const std::string name = argument.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : argument.substr(equals + 1);
    if (name == "--devices") arguments.devices = std::stoi(value);
    if (name == "--data") arguments.data = value;
    if (name == "--steps") arguments.steps = std::stoi(value);
    if (name == "--dir") arguments.dir = value;
    if (name == "--phase") arguments.phase = value;
    if (name == "--inside") arguments.inside = value == "1";
  }
  return arguments;
}

// Every rank's values, in rank order (all_gather takes uneven lengths).
template <class T>
std::vector<std::vector<int64_t>> gather_values(fabric::Fabric& fabric, const std::vector<T>& local) {
  std::vector<int64_t> values(local.begin(), local.end());
  std::vector<std::vector<int64_t>> all;
  for (const auto& tensor : fabric.all_gather(torch::tensor(values, torch::kLong))) {
    const auto cpu = tensor.cpu();
    all.emplace_back(cpu.data_ptr<int64_t>(), cpu.data_ptr<int64_t>() + cpu.numel());
  }
  return all;
}

bool same_on_every_rank(fabric::Fabric& fabric, const torch::Tensor& tensor) {
  const auto largest = fabric.all_reduce(tensor.to(torch::kDouble), fabric::ReduceOp::Max);
  const auto smallest = fabric.all_reduce(tensor.to(torch::kDouble), fabric::ReduceOp::Min);
  return torch::equal(largest, smallest);
}

// Rank r's k-th value must be order[(r + k * world) % m], and the shares
// either cover `order` exactly once (evaluation: ranks differ by at most
// one) or all have ceil(m / world) values (training: padded).
void check_shares(const std::vector<std::vector<int64_t>>& shares, const std::vector<int64_t>& order, bool padded,
                  const std::string& what) {
  const size_t world = shares.size();
  const size_t m = order.size();
  std::vector<int64_t> all;
  for (size_t r = 0; r < world; ++r) {
    const size_t real = m > r ? (m - r + world - 1) / world : 0;
    const size_t expected = padded ? (m + world - 1) / world : real;
    check(shares[r].size() == expected, what + ": rank " + std::to_string(r) + " got " +
                                            std::to_string(shares[r].size()) + " values, not " +
                                            std::to_string(expected));
    for (size_t k = 0; k < shares[r].size(); ++k) {
      check(shares[r][k] == order[(r + k * world) % m],
            what + ": rank " + std::to_string(r) + "'s value " + std::to_string(k) + " is " +
                std::to_string(shares[r][k]) + ", not position " + std::to_string(r + k * world) + " of the loop");
      if (k < real) all.push_back(shares[r][k]);
    }
  }
  std::vector<int64_t> sorted_order = order;
  std::sort(sorted_order.begin(), sorted_order.end());
  std::sort(all.begin(), all.end());
  check(all == sorted_order, what + ": the ranks' own values are not the loop's values exactly once");
}

// The values of `for (T i = begin; i < end; i += step)`.
template <class T>
std::vector<int64_t> loop_values(T begin, T end, T step) {
  std::vector<int64_t> values;
  for (T i = begin; i < end; i += step) {
    values.push_back(static_cast<int64_t>(i));
    if (end - i <= step) break;  // no overflow past the end
  }
  return values;
}

// A set-up model whose backward is a real DDP all-reduce: every rank must
// run as many of them.
struct Trainer {
  explicit Trainer(fabric::Fabric& fabric) : fabric(fabric), model(4, 1) { fabric.setup(model); }
  void backward(double value) {
    model->zero_grad();
    const auto x = torch::full({1, 4}, value);
    fabric.backward(model->forward(x).pow(2).sum());
  }
  fabric::Fabric& fabric;
  torch::nn::Linear model;
};

// One pass over the loop at one site (the same file:line every call).
std::vector<int64_t> pass_at_site_a(fabric::Fabric& fabric, Trainer& trainer, int64_t n, bool train) {
  std::vector<int64_t> seen;
  for (int64_t i : fabric.shard_range(int64_t{0}, n)) {
    seen.push_back(i);
    if (train) trainer.backward(static_cast<double>(i));
  }
  return seen;
}

// The same loop at another site.
std::vector<int64_t> pass_at_site_b(fabric::Fabric& fabric, Trainer& trainer, int64_t n, bool train) {
  std::vector<int64_t> seen;
  for (int64_t i : fabric.shard_range(int64_t{0}, n)) {
    seen.push_back(i);
    if (train) trainer.backward(static_cast<double>(i));
  }
  return seen;
}

template <class T>
void check_range_type(fabric::Fabric& fabric, T begin, T end, T step, const std::string& what) {
  torch::NoGradGuard evaluation;
  const auto range = fabric.shard_range(begin, end, step);
  static_assert(std::is_same<typename decltype(range)::value_type, T>::value, "shard_range<T> yields T");
  std::vector<T> mine;
  for (const T value : range) mine.push_back(value);
  check_shares(gather_values(fabric, mine), loop_values(begin, end, step), false, what);
  check(range.total() == loop_values(begin, end, step).size(), what + ": total() is not the loop's count");
}

void check_shard_range(fabric::Fabric& fabric, Trainer& trainer) {
  const int world = fabric.world_size();
  // Evaluation: every value once, strided; no allocation per value.
  {
    std::vector<int> mine;
    for (int i : fabric.shard_range(0, 1001)) mine.push_back(i);
    check_shares(gather_values(fabric, mine), loop_values(0, 1001, 1), false, "shard_range evaluation");
  }
  // Training (a backward per value): every rank the same count.
  {
    std::vector<int64_t> mine;
    for (int64_t i : fabric.shard_range(int64_t{5}, int64_t{5 + 3 * 101}, 3)) {
      mine.push_back(i);
      trainer.backward(static_cast<double>(i));
    }
    check_shares(gather_values(fabric, mine), loop_values<int64_t>(5, 5 + 3 * 101, 3), world > 1,
                 "shard_range training, step 3");
  }
  // Sticky per site: a site that fed a backward pass pads later passes too,
  // another site does not.
  {
    const auto order = loop_values<int64_t>(0, 101, 1);
    check_shares(gather_values(fabric, pass_at_site_a(fabric, trainer, 101, false)), order, false,
                 "site a, evaluation first");
    check_shares(gather_values(fabric, pass_at_site_a(fabric, trainer, 101, true)), order, world > 1,
                 "site a, training");
    check_shares(gather_values(fabric, pass_at_site_a(fabric, trainer, 101, false)), order, world > 1,
                 "site a after training (sticky)");
    check_shares(gather_values(fabric, pass_at_site_b(fabric, trainer, 101, false)), order, false,
                 "site b, evaluation");
  }
  // Fewer values than ranks: evaluation under NoGradGuard counts the value
  // once; training gives every rank a step.
  {
    std::vector<int> seen;
    {
      torch::NoGradGuard evaluation;
      for (int i : fabric.shard_range(7, 8)) seen.push_back(i);
    }
    check_shares(gather_values(fabric, seen), {7}, false, "one value, evaluation");
    seen.clear();
    for (int i : fabric.shard_range(7, 8)) {
      seen.push_back(i);
      trainer.backward(i);
    }
    check_shares(gather_values(fabric, seen), {7}, world > 1, "one value, training");
  }
  // No values.
  {
    const auto empty = fabric.shard_range(5, 5);
    check(empty.begin() == empty.end() && empty.empty() && empty.size() == 0 && empty.total() == 0,
          "shard_range(5, 5) is not empty");
    const auto backwards = fabric.shard_range(5, 2);
    check(backwards.begin() == backwards.end() && backwards.total() == 0, "shard_range(5, 2) is not empty");
    const auto unsigned_empty = fabric.shard_range(size_t{3}, size_t{0});
    check(unsigned_empty.begin() == unsigned_empty.end(), "shard_range(3u, 0u) is not empty");
  }
  // Signed, unsigned, other widths, a span across zero.
  check_range_type<size_t>(fabric, 0, 10, 3, "size_t step 3");
  check_range_type<unsigned>(fabric, 1, 100, 7, "unsigned step 7");
  check_range_type<int>(fabric, -7, 8, 4, "int from -7");
  check_range_type<long>(fabric, -50, 50, 9, "long");
  check_range_type<int64_t>(fabric, -1000000000000, 1000000000000, 300000000000, "int64_t across zero");
  check_range_type<int16_t>(fabric, -300, 300, 17, "int16_t");
  check_range_type<int>(fabric, std::numeric_limits<int>::max() - 10, std::numeric_limits<int>::max(), 3,
                        "int near its maximum");
  // T from begin alone (as the loop variable's type): end and step convert.
  {
    torch::NoGradGuard evaluation;
    const size_t n = 20;
    const auto range = fabric.shard_range(0, n, 4);
    static_assert(std::is_same<decltype(range)::value_type, int>::value, "T is begin's type");
    std::vector<int> mine(range.begin(), range.end());
    check_shares(gather_values(fabric, mine), loop_values(0, 20, 4), false, "deduced int");
    std::vector<int> by_reference;
    for (auto& i : fabric.shard_range(0, 20, 4)) by_reference.push_back(i);  // as over a container
    check(by_reference == mine, "for (auto& i : shard_range) differs");
  }
  // Invalid steps, named.
  check_error(error_of([&] { (void)fabric.shard_range(0, 10, 0); }), "step is 0", "step 0");
  check_error(error_of([&] { (void)fabric.shard_range(0, 10, -2); }), "step is -2", "step -2");
  check_error(error_of([&] { (void)fabric.shard_range(size_t{0}, size_t{10}, size_t{0}); }), "step is 0",
              "unsigned step 0");
  // One process: the loop's values, in order, nothing else (also training).
  if (world == 1) {
    std::vector<int64_t> mine;
    for (int64_t i : fabric.shard_range(int64_t{3}, int64_t{40}, 6)) {
      mine.push_back(i);
      trainer.backward(1.0);
    }
    check(mine == loop_values<int64_t>(3, 40, 6), "one process: not the loop's values");
  }
}

struct Batch {
  int64_t id = 0;
  std::vector<float> data;
  int touched = 0;
};

std::vector<Batch> make_batches(int64_t count) {
  std::vector<Batch> batches(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    batches[static_cast<size_t>(i)].id = i;
    batches[static_cast<size_t>(i)].data.assign(3, static_cast<float>(i));
  }
  return batches;
}

void check_shard_elements(fabric::Fabric& fabric, Trainer& trainer) {
  const int world = fabric.world_size();
  const int rank = fabric.global_rank();
  const auto order = loop_values<int64_t>(0, 101, 1);
  // Evaluation over a vector of structs, modified through the view.
  {
    auto batches = make_batches(101);
    std::vector<int64_t> ids;
    for (auto& batch : fabric.shard_elements(batches)) {
      ids.push_back(batch.id);
      batch.touched += 1;
      batch.data.push_back(static_cast<float>(rank));
    }
    check_shares(gather_values(fabric, ids), order, false, "shard_elements evaluation");
    for (size_t p = 0; p < batches.size(); ++p) {
      const bool mine = static_cast<int>(p % static_cast<size_t>(world)) == rank;
      check(batches[p].touched == (mine ? 1 : 0), "shard_elements: element " + std::to_string(p) +
                                                      (mine ? " was not modified" : " was modified by another rank"));
      check(batches[p].data.size() == (mine ? 4u : 3u), "shard_elements: a member vector was not modified");
    }
    // Const containers give const references.
    const auto& constant = batches;
    const auto view = fabric.shard_elements(constant);
    static_assert(std::is_same<decltype(*view.begin()), const Batch&>::value, "const container: const Batch&");
    auto mutable_view = fabric.shard_elements(batches);
    static_assert(std::is_same<decltype(*mutable_view.begin()), Batch&>::value, "container: Batch&");
    static_assert(std::is_same<decltype(*std::as_const(mutable_view).begin()), Batch&>::value,
                  "a view of the program's container gives its elements");
    // Training: padded, the same count on every rank.
    ids.clear();
    for (auto& batch : fabric.shard_elements(batches)) {
      ids.push_back(batch.id);
      trainer.backward(static_cast<double>(batch.id));
    }
    check_shares(gather_values(fabric, ids), order, world > 1, "shard_elements training");
  }
  // An rvalue container: moved into the view, which owns it for the loop.
  {
    std::vector<int64_t> ids;
    for (auto& batch : fabric.shard_elements(make_batches(101))) {
      batch.touched += 1;
      ids.push_back(batch.id + static_cast<int64_t>(batch.data.size()) - 3);
    }
    check_shares(gather_values(fabric, ids), order, false, "shard_elements of a temporary");
    auto owned = fabric.shard_elements(make_batches(50));
    static_assert(std::is_same<decltype(owned.container()), std::vector<Batch>&>::value, "the view owns a vector");
    std::vector<int64_t> kept;
    for (const auto& batch : owned) kept.push_back(batch.id);
    check_shares(gather_values(fabric, kept), loop_values<int64_t>(0, 50, 1), false, "an owned view, kept");
  }
  // deque, array, C array.
  {
    std::deque<int> deque(37);
    std::iota(deque.begin(), deque.end(), 0);
    std::vector<int> mine;
    for (int& value : fabric.shard_elements(deque)) mine.push_back(value);
    check_shares(gather_values(fabric, mine), loop_values(0, 37, 1), false, "std::deque");
    std::array<int, 11> array{};
    std::iota(array.begin(), array.end(), 0);
    mine.clear();
    for (int value : fabric.shard_elements(array)) mine.push_back(value);
    check_shares(gather_values(fabric, mine), loop_values(0, 11, 1), false, "std::array");
    int plain[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    mine.clear();
    for (int& value : fabric.shard_elements(plain)) {
      mine.push_back(value);
      value = -1;
    }
    check_shares(gather_values(fabric, mine), loop_values(0, 9, 1), false, "a C array");
    check(plain[rank] == -1, "a C array's element was not modified through the view");
    std::vector<int> none;
    check(fabric.shard_elements(none).begin() == fabric.shard_elements(none).end(), "an empty vector");
  }
  if (world == 1) {
    auto batches = make_batches(7);
    std::vector<int64_t> ids;
    for (auto& batch : fabric.shard_elements(batches)) {
      ids.push_back(batch.id);
      trainer.backward(1.0);
    }
    check(ids == loop_values<int64_t>(0, 7, 1), "one process: not every element in order");
  }
}

template <class Generator>
std::string state_of(const Generator& generator) {
  std::ostringstream text;
  text << generator;
  return text.str();
}

void check_shuffle(fabric::Fabric& fabric) {
  const int rank = fabric.global_rank();
  const int world = fabric.world_size();
  std::vector<int> values(1000);
  std::iota(values.begin(), values.end(), 0);
  std::mt19937 generator(1234 + static_cast<unsigned>(rank));  // differs per rank
  std::mt19937 reference = generator;
  std::vector<int> expected = values;
  std::shuffle(expected.begin(), expected.end(), reference);  // what this rank would draw
  fabric.shuffle(values.begin(), values.end(), generator);
  check(state_of(generator) == state_of(reference), "shuffle: the generator is not where std::shuffle leaves it");
  const auto all = gather_values(fabric, values);
  for (const auto& other : all) check(other == all[0], "shuffle: the ranks have different orders");
  if (rank == 0) check(values == expected, "shuffle on rank 0 (or one process) is not std::shuffle's");
  if (world > 1 && rank == 1) check(values != expected, "rank 1 kept its own draws (the check would prove nothing)");
  // Elements that are not trivially copied.
  std::vector<std::string> words;
  for (int i = 0; i < 50; ++i) words.push_back("word " + std::to_string(i) + std::string(40, 'x'));
  std::mt19937_64 wide(99 + static_cast<unsigned>(rank));
  fabric.shuffle(words.begin(), words.end(), wide);
  std::vector<int64_t> numbers;
  for (const auto& word : words) numbers.push_back(std::stoll(word.substr(5)));
  const auto word_orders = gather_values(fabric, numbers);
  for (const auto& other : word_orders) check(other == word_orders[0], "shuffle of strings differs");
  std::set<int64_t> distinct(numbers.begin(), numbers.end());
  check(distinct.size() == 50, "shuffle lost elements");
  for (const auto& word : words) check(word.substr(word.size() - 40) == std::string(40, 'x'), "shuffle damaged a string");
  // Another number of elements on one rank: the same error on every rank.
  if (world > 1) {
    std::vector<int> uneven(rank == 1 ? 9 : 10, 0);
    std::mt19937 other(5);
    check_error(error_of([&] { fabric.shuffle(uneven.begin(), uneven.end(), other); }),
                "rank 0 has 10 and rank 1 has 9", "shuffle of different lengths");
  }
}

void check_randperm(fabric::Fabric& fabric) {
  const int rank = fabric.global_rank();
  torch::manual_seed(100 + static_cast<uint64_t>(rank));  // differs per rank
  at::Generator own = at::detail::createCPUGenerator(100 + static_cast<uint64_t>(rank));
  const auto expected = at::randperm(50, own, torch::kLong);
  const auto perm = fabric.randperm(50);
  check(perm.scalar_type() == torch::kLong && perm.dim() == 1 && perm.size(0) == 50, "randperm's shape or dtype");
  check(same_on_every_rank(fabric, perm), "randperm differs between the ranks");
  if (rank == 0) check(torch::equal(perm, expected), "randperm on rank 0 is not torch::randperm");
  // Every rank's generator advanced as torch::randperm advances it.
  check(torch::equal(torch::rand({3}), at::rand({3}, own)), "randperm did not draw as torch::randperm does");
  const auto small = fabric.randperm(20, torch::kInt);
  check(small.scalar_type() == torch::kInt && same_on_every_rank(fabric, small), "randperm(20, kInt)");
  const auto floats = fabric.randperm(20, torch::TensorOptions().dtype(torch::kFloat));
  check(floats.scalar_type() == torch::kFloat && same_on_every_rank(fabric, floats), "randperm(20, kFloat)");
  check(torch::equal(std::get<0>(floats.sort()), torch::arange(20, torch::kFloat)), "randperm is a permutation");
  if (fabric.world_size() == 1) {
    torch::manual_seed(5);
    const auto mine = fabric.randperm(30);
    torch::manual_seed(5);
    check(torch::equal(mine, torch::randperm(30)), "one process: randperm is not torch::randperm");
  }
}

// A local variable (a parameter here) named `fabric` does not hide
// namespace fabric before `::` (a migrated main declares
// `fabric::Fabric fabric(...)` and a loader class calls fabric::shard).
std::vector<size_t> shard_with_a_variable_named_fabric(fabric::Fabric& fabric, std::vector<size_t> indices) {
  (void)fabric;
  check(fabric::world_size() == fabric.world_size(), "fabric::world_size()");
  return fabric::shard(std::move(indices));
}

void check_tensor_and_free_shard(fabric::Fabric& fabric) {
  const int rank = fabric.global_rank();
  const int world = fabric.world_size();
  check(fabric::global_rank() == rank && fabric::world_size() == world, "the free global_rank/world_size");
  // Each rank's own order: shard takes rank 0's.
  torch::manual_seed(300 + static_cast<uint64_t>(rank));
  const auto order = torch::randperm(1001).to(torch::kInt);
  const auto all_orders = gather_values(fabric, std::vector<int64_t>(order.data_ptr<int>(), order.data_ptr<int>() + 1001));
  if (world > 1) check(all_orders[1] != all_orders[0], "the ranks' orders agree (the check would prove nothing)");
  const auto exact = fabric.shard(order, /*pad=*/false);
  check(exact.scalar_type() == torch::kInt && exact.device() == order.device() && exact.dim() == 1,
        "shard of a tensor: dtype, device or shape");
  const auto to_vector = [](const torch::Tensor& tensor) {
    const auto values = tensor.to(torch::kLong).contiguous();
    return std::vector<int64_t>(values.data_ptr<int64_t>(), values.data_ptr<int64_t>() + values.numel());
  };
  check_shares(gather_values(fabric, to_vector(exact)), all_orders[0], false, "fabric.shard(tensor, false)");
  check_shares(gather_values(fabric, to_vector(fabric.shard(order))), all_orders[0], world > 1,
               "fabric.shard(tensor)");
  check_error(error_of([&] { (void)fabric.shard(torch::zeros({3, 2}, torch::kLong)); }), "1-D tensor of integer",
              "shard of a 2-D tensor");
  check_error(error_of([&] { (void)fabric.shard(torch::zeros({3})); }), "1-D tensor of integer",
              "shard of a float tensor");
  // The free functions: padded with autograd on, exact under NoGradGuard.
  std::vector<size_t> indices(1001);
  std::iota(indices.begin(), indices.end(), size_t{0});
  std::mt19937 own(77 + static_cast<unsigned>(rank));
  std::shuffle(indices.begin(), indices.end(), own);
  const auto index_orders = gather_values(fabric, indices);
  check_shares(gather_values(fabric, shard_with_a_variable_named_fabric(fabric, indices)), index_orders[0], world > 1,
               "fabric::shard with autograd on");
  {
    torch::NoGradGuard evaluation;
    check_shares(gather_values(fabric, fabric::shard(indices)), index_orders[0], false,
                 "fabric::shard under NoGradGuard");
    check_shares(gather_values(fabric, to_vector(fabric::shard(order))), all_orders[0], false,
                 "fabric::shard(tensor) under NoGradGuard");
  }
  check_shares(gather_values(fabric, to_vector(fabric::shard(order))), all_orders[0], world > 1,
               "fabric::shard(tensor) with autograd on");
  // pad given: as it says, whatever autograd is.
  check_shares(gather_values(fabric, fabric::shard(indices, /*pad=*/false)), index_orders[0], false,
               "fabric::shard(indices, false)");
  {
    torch::NoGradGuard evaluation;
    check_shares(gather_values(fabric, to_vector(fabric::shard(order, /*pad=*/true))), all_orders[0], world > 1,
                 "fabric::shard(tensor, true) under NoGradGuard");
  }
  std::vector<int> small(10, 1);
  const std::vector<int> small_share = fabric::shard(small);
  check(small_share.size() == (10 + static_cast<size_t>(world) - 1) / static_cast<size_t>(world),
        "fabric::shard of std::vector<int>");
  if (world == 1) check(fabric::shard(indices) == indices, "one process: fabric::shard changed the indices");
}

// Draws from the default CPU generator, as a vector of doubles.
torch::Tensor draw(int64_t count) { return torch::randn({count}, torch::kDouble); }

// Shared draws (0, 4, 9) and draws inside per_rank_random scopes (1-3:
// the ranks draw different amounts; 5: a second scope; 6-8: nested), with
// the guards or without them.
std::vector<torch::Tensor> random_sequence(fabric::Fabric& fabric, bool guarded) {
  const int rank = fabric.global_rank();
  std::vector<torch::Tensor> draws;
  const auto scope = [&](const std::function<void()>& body) {
    if (!guarded) return body();
    auto per_rank = fabric.per_rank_random();
    body();
  };
  torch::manual_seed(42);
  draws.push_back(draw(8));
  scope([&] {
    draws.push_back(draw(8));
    draws.push_back(draw(1 + 100 * rank));
    draws.push_back(torch::bernoulli(torch::full({16}, 0.5)));  // a dropout mask
  });
  draws.push_back(draw(8));
  scope([&] { draws.push_back(draw(8)); });
  scope([&] {
    draws.push_back(draw(4));
    scope([&] { draws.push_back(draw(4)); });
    draws.push_back(draw(4));
  });
  draws.push_back(draw(8));
  return draws;
}

void check_per_rank_random(fabric::Fabric& fabric) {
  const auto draws = random_sequence(fabric, /*guarded=*/true);
  if (fabric.world_size() == 1) {
    // One process: the guard does nothing (the draws are the original's).
    const auto original = random_sequence(fabric, /*guarded=*/false);
    for (size_t i = 0; i < draws.size(); ++i) {
      check(torch::equal(draws[i], original[i]), "one process: per_rank_random changed draw " + std::to_string(i));
    }
    return;
  }
  // The shared stream: where it would be without the scopes, on every rank.
  at::Generator reference = at::detail::createCPUGenerator(42);
  for (const size_t shared : {0, 4, 9}) {
    check(torch::equal(draws[shared], at::randn({8}, reference, torch::kDouble)),
          "shared draw " + std::to_string(shared) + " is not where the shared stream would be without the scopes");
    check(same_on_every_rank(fabric, draws[shared]), "shared draw " + std::to_string(shared) + " differs by rank");
  }
  for (const size_t own : {1, 3, 5, 6, 7, 8}) {
    check(!same_on_every_rank(fabric, draws[own]), "draw " + std::to_string(own) + " inside per_rank_random is the same on every rank");
  }
  // The own stream continues: the second scope is not reseeded.
  check(!torch::equal(draws[1], draws[5]), "the per-rank stream was reseeded for the second scope");
}

// A fabric::RandomState saved when no rank, or only rank 0, has used its
// own stream, and loaded: the shared stream continues where it was.
void check_random_state_entries(fabric::Fabric& fabric) {
  const std::string path = fabric.broadcast("/tmp/fabric_data_sharding_" + std::to_string(::getpid()) + ".ckpt", 0);
  fabric::State state{{"rng", fabric::RandomState()}};
  for (int round = 0; round < 2; ++round) {
    if (round == 1 && fabric.global_rank() == 0) {
      auto per_rank = fabric.per_rank_random();
      (void)draw(3);
    }
    torch::manual_seed(9);
    fabric.save(path, state);
    const auto expected = draw(4);
    (void)draw(7);
    fabric.load(path, state);
    check(torch::equal(draw(4), expected), "a RandomState round trip moved the shared stream");
    check(same_on_every_rank(fabric, expected), "the shared stream differs between the ranks");
  }
  fabric.barrier("checkpoint read");
  if (fabric.is_global_zero()) std::remove(path.c_str());
}

void check_second_launch(fabric::Fabric& fabric) {
  fabric::Fabric second(fabric::Options().accelerator("cpu").devices(fabric.world_size()));
  if (fabric.world_size() > 1) {
    check_error(error_of([&] { second.launch(); }), "another fabric::Fabric is launched in this process",
                "a second launched Fabric");
  } else {
    second.launch();  // two one-process Fabrics (a test comparing precisions) are no job
  }
  check(fabric::world_size() == fabric.world_size(), "the free functions changed Fabric");
}

int run_checks(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  check(fabric.world_size() == arguments.devices, "expected " + std::to_string(arguments.devices) + " ranks");
  check_random_state_entries(fabric);
  Trainer trainer(fabric);
  check_shard_range(fabric, trainer);
  check_shard_elements(fabric, trainer);
  check_shuffle(fabric);
  check_randperm(fabric);
  check_tensor_and_free_shard(fabric);
  check_per_rank_random(fabric);
  check_second_launch(fabric);
  fabric.print("data sharding: checks passed on", fabric.world_size(), "ranks");
  return 0;
}

int run_before_launch() {
  int caught = 0;
  for (const auto& call : std::vector<std::pair<std::string, std::function<void()>>>{
           {"fabric::shard", [] { (void)fabric::shard(std::vector<size_t>{3, 1, 2}); }},
           {"fabric::global_rank", [] { (void)fabric::global_rank(); }},
           {"fabric::world_size", [] { (void)fabric::world_size(); }},
           {"fabric::shard", [] { (void)fabric::shard(torch::arange(5)); }}}) {
    try {
      call.second();
    } catch (const std::logic_error& error) {
      std::fprintf(stderr, "caught: %s\n", error.what());
      check(std::string(error.what()).rfind(call.first + " was called before fabric.launch()", 0) == 0,
            "the message does not name " + call.first);
      ++caught;
    }
  }
  if (caught > 0) return caught == 4 ? 3 : 1;
  // One process: rank 0 of 1, indices unchanged.
  check(fabric::global_rank() == 0 && fabric::world_size() == 1, "one process: rank 0 of 1");
  check(fabric::shard(std::vector<size_t>{3, 1, 2}) == std::vector<size_t>{3, 1, 2}, "one process: shard");
  std::printf("data sharding: before_launch passed (one process)\n");
  return 0;
}

// A model trained on the same batches on every rank, on sharded ones, or
// with a constant loss; the duplicate check's cost measured.
int run_duplicate(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(3);
  const auto inputs = torch::randn({256, 16});  // before the loop: the same on every rank
  const auto targets = inputs.sum(1, true).sin();
  torch::nn::Sequential model(torch::nn::Linear(16, 32), torch::nn::Tanh(), torch::nn::Linear(32, 1));
  torch::optim::SGD optimizer(model->parameters(), 0.05);
  fabric.setup(model, optimizer);
  const int64_t batch = 16;
  int steps = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int epoch = 0; steps < arguments.steps; ++epoch) {
    std::vector<int64_t> starts;
    if (arguments.data == "sharded") {
      for (int64_t i : fabric.shard_range(int64_t{0}, inputs.size(0), batch)) starts.push_back(i);
    } else {
      for (int64_t i = 0; i < inputs.size(0); i += batch) starts.push_back(i);
    }
    for (int64_t i : starts) {
      if (steps == arguments.steps) break;
      optimizer.zero_grad();
      const auto x = inputs.narrow(0, i, batch);
      const auto y = targets.narrow(0, i, batch);
      auto loss = torch::mse_loss(model->forward(x), y);
      if (arguments.data == "constant") loss = (loss * 0.0) + 1.0;
      fabric.backward(loss);
      fabric.step(optimizer);
      ++steps;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // What one sampled check costs at most: its all-reduce of three doubles
  // (and the loss's value), timed here.
  const int reductions = 50;
  const auto timed = std::chrono::steady_clock::now();
  for (int i = 0; i < reductions; ++i) {
    (void)fabric.all_reduce(torch::tensor({1.0, -1.0, 0.0}, torch::kDouble), fabric::ReduceOp::Max).cpu();
  }
  const double check_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - timed).count() / reductions;
  // The checks made: passes 3, 5, 9, ...; sharded data ends them at the
  // first (the ranks differ), the same batches at the third (decided); a
  // constant loss proves nothing and keeps them going.
  int sampled = 0;
  for (uint64_t pass = 3; pass <= static_cast<uint64_t>(steps); pass = 2 * pass - 1) ++sampled;
  if (arguments.data == "sharded") sampled = std::min(sampled, 1);
  if (arguments.data == "same") sampled = std::min(sampled, 3);
  fabric.printf(
      "duplicate check cost: %d steps in %.3f s (%.1f us per step); %d checks of about %.1f us each: %.3f%% of the "
      "run\n",
      steps, seconds, 1e6 * seconds / steps, sampled, 1e6 * check_seconds, 100.0 * sampled * check_seconds / seconds);
  fabric.print("data sharding: duplicate", arguments.data, "trained", steps, "steps on", fabric.world_size(), "ranks");
  return 0;
}

// Per-rank and shared draws, saved and resumed with a fabric::RandomState.
int run_random_resume(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  torch::manual_seed(11);
  std::ofstream out(arguments.dir + "/" + arguments.phase + "_rank" + std::to_string(this_rank) + ".txt");
  const std::string checkpoint = arguments.dir + "/random.ckpt";
  fabric::State state{{"rng", fabric::RandomState()}};
  const auto write = [&out](int step, const char* what, const torch::Tensor& values) {
    out << "step " << step << " " << what;
    for (int64_t i = 0; i < values.numel(); ++i) {
      char text[32];
      std::snprintf(text, sizeof text, " %a", values[i].item<double>());
      out << text;
    }
    out << "\n";
  };
  // Saved and loaded inside a per_rank_random scope or outside.
  const auto inside_or_not = [&](const std::function<void()>& body) {
    if (!arguments.inside) return body();
    auto per_rank = fabric.per_rank_random();
    body();
  };
  int first_step = 0;
  if (arguments.phase == "second") {
    // Draws before the load, in both streams, must not matter.
    {
      auto per_rank = fabric.per_rank_random();
      (void)draw(5);
    }
    (void)draw(3);
    inside_or_not([&] { fabric.load(checkpoint, state); });
    first_step = 3;
  }
  const int end_step = arguments.phase == "first" ? 3 : 6;
  for (int step = first_step; step < end_step; ++step) {
    {
      auto per_rank = fabric.per_rank_random();
      write(step, "own", draw(4 + this_rank));
    }
    write(step, "shared", draw(3));
    if (arguments.phase == "first" && step == 2) inside_or_not([&] { fabric.save(checkpoint, state); });
  }
  out.close();
  fabric.print("data sharding: random_resume", arguments.phase, "passed on", fabric.world_size(), "ranks");
  return 0;
}

// fabricize verify's `share` lines (FABRIC_VERIFY_RECORD is the driver's).
int run_records(const Arguments& arguments) {
  fabric::Fabric fabric(fabric::Options().accelerator("cpu").devices(arguments.devices));
  fabric.launch();
  this_rank = fabric.global_rank();
  const auto world = static_cast<uint64_t>(fabric.world_size());
  const auto rank = static_cast<uint64_t>(this_rank);
  const auto mine_of = [&](uint64_t total) { return total > rank ? (total - rank + world - 1) / world : 0; };
  std::vector<std::string> expected;
  const auto expect = [&](int line, uint64_t total) {
    expected.push_back("share " + std::string(__FILE__) + ":" + std::to_string(line) + " " + std::to_string(total) +
                       " " + std::to_string(mine_of(total)));
  };
  for (int pass = 0; pass < 2; ++pass) {  // the second pass adds no line
    for (int i : fabric.shard_range(0, 101, 2)) (void)i;
  }
  expect(__LINE__ - 2, 51);
  std::vector<int> elements(13);
  for (int& value : fabric.shard_elements(elements)) value = 1;
  expect(__LINE__ - 1, 13);
  std::vector<size_t> indices(1001);
  std::iota(indices.begin(), indices.end(), size_t{0});
  (void)fabric.shard(indices);
  expect(__LINE__ - 1, 1001);
  (void)fabric::shard(indices);
  expect(__LINE__ - 1, 1001);
  struct Numbers : torch::data::datasets::Dataset<Numbers> {
    torch::data::Example<> get(size_t index) override {
      return {torch::full({1}, static_cast<double>(index)), torch::tensor(static_cast<int64_t>(index))};
    }
    torch::optional<size_t> size() const override { return 77; }
  };
  auto loader = fabric.setup_dataloader<torch::data::samplers::SequentialSampler>(
      Numbers().map(torch::data::transforms::Stack<>()), 10);
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (auto& batch : *loader) (void)batch;
  }
  expected.push_back("share loader1 77 " + std::to_string(world == 1 ? 77 : mine_of(77)));
  std::ifstream file(arguments.dir + "/rank" + std::to_string(this_rank) + ".txt");
  std::vector<std::string> shares;
  for (std::string line; std::getline(file, line);) {
    if (line.rfind("share ", 0) == 0) shares.push_back(line);
  }
  std::string listed;
  for (const auto& line : shares) listed += "\n  " + line;
  check(shares == expected, "the share lines are not the expected ones:" + listed);
  fabric.print("data sharding: records passed on", fabric.world_size(), "ranks");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Arguments arguments = parse_arguments(argc, argv);
  if (arguments.scenario == "checks") return run_checks(arguments);
  if (arguments.scenario == "before_launch") return run_before_launch();
  if (arguments.scenario == "duplicate") return run_duplicate(arguments);
  if (arguments.scenario == "random_resume") return run_random_resume(arguments);
  if (arguments.scenario == "records") return run_records(arguments);
  std::fprintf(stderr, "unknown scenario '%s'\n", arguments.scenario.c_str());
  return 2;
}
