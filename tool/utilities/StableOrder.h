// std::stable_sort and std::stable_partition for vectors, without a
// temporary buffer: libstdc++ 12 implements both with
// std::get_temporary_buffer, which clang++-19 reports as deprecated in each
// translation unit that uses them (ten warnings in a clean build of the
// tool). The same order, from std::sort over positions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <utility>
#include <vector>

namespace fabricize {

// Sorts `items` by `less`; equal items keep their order.
template <class T, class Less>
void stableSort(std::vector<T>& items, Less less) {
  std::vector<std::size_t> order(items.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (less(items[a], items[b])) return true;
    if (less(items[b], items[a])) return false;
    return a < b;
  });
  std::vector<T> sorted;
  sorted.reserve(items.size());
  for (std::size_t position : order) sorted.push_back(std::move(items[position]));
  items = std::move(sorted);
}

// Moves the items that satisfy `first` before the others; each group keeps
// its order.
template <class T, class Predicate>
void stablePartition(std::vector<T>& items, Predicate first) {
  std::vector<bool> isFirst;
  isFirst.reserve(items.size());
  for (const T& item : items) isFirst.push_back(first(item));  // before any item is moved from
  std::vector<T> ordered;
  ordered.reserve(items.size());
  for (bool wanted : {true, false})
    for (std::size_t i = 0; i < items.size(); ++i)
      if (isFirst[i] == wanted) ordered.push_back(std::move(items[i]));
  items = std::move(ordered);
}

}  // namespace fabricize
