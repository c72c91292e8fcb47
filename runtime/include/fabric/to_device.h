// fabric::to_device: moves a batch (and anything nested in it) to a device.
//
// Fabric loaders call it on every batch, unqualified, so it is a
// customization point. Supported out of the box: torch::Tensor,
// torch::data::Example<Data, Target>, std::vector, std::pair, std::tuple,
// c10::optional, and arithmetic values / std::string (returned unchanged).
//
// For your own batch type, declare in the namespace of that type:
//
//   namespace mylib {
//   struct Batch { torch::Tensor image, label; std::string id; };
//   Batch to_device(const Batch& batch, const torch::Device& device) {
//     return {batch.image.to(device), batch.label.to(device), batch.id};
//   }
//   }
//
// Argument-dependent lookup finds it, also inside std::vector<mylib::Batch>
// and friends. A batch type with no overload fails to compile with a message
// that says this.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace fabric {

// All overloads are declared before any is defined, so each container
// overload finds the others (not only ADL, which never looks in fabric::
// for std::pair<torch::Tensor, ...>).
inline torch::Tensor to_device(const torch::Tensor& tensor, const torch::Device& device);
template <class Data, class Target>
torch::data::Example<Data, Target> to_device(const torch::data::Example<Data, Target>& example,
                                             const torch::Device& device);
template <class Data>
torch::data::Example<Data, torch::data::example::NoTarget> to_device(
    const torch::data::Example<Data, torch::data::example::NoTarget>& example, const torch::Device& device);
template <class T, class Allocator>
std::vector<T, Allocator> to_device(const std::vector<T, Allocator>& values, const torch::Device& device);
template <class First, class Second>
std::pair<First, Second> to_device(const std::pair<First, Second>& pair, const torch::Device& device);
template <class... Elements>
std::tuple<Elements...> to_device(const std::tuple<Elements...>& tuple, const torch::Device& device);
template <class T>
c10::optional<T> to_device(const c10::optional<T>& value, const torch::Device& device);
// Everything else: values without a device pass through; any other class
// type is a compile-time error asking for an overload.
template <class T>
T to_device(const T& value, const torch::Device& device);

namespace detail {
template <class T>
struct always_false : std::false_type {};
}  // namespace detail

inline torch::Tensor to_device(const torch::Tensor& tensor, const torch::Device& device) {
  // An undefined tensor (an absent target) stays undefined.
  return tensor.defined() ? tensor.to(device) : tensor;
}

template <class Data, class Target>
torch::data::Example<Data, Target> to_device(const torch::data::Example<Data, Target>& example,
                                             const torch::Device& device) {
  return {to_device(example.data, device), to_device(example.target, device)};
}

template <class Data>
torch::data::Example<Data, torch::data::example::NoTarget> to_device(
    const torch::data::Example<Data, torch::data::example::NoTarget>& example, const torch::Device& device) {
  return torch::data::Example<Data, torch::data::example::NoTarget>(to_device(example.data, device));
}

template <class T, class Allocator>
std::vector<T, Allocator> to_device(const std::vector<T, Allocator>& values, const torch::Device& device) {
  std::vector<T, Allocator> moved;
  moved.reserve(values.size());
  for (const auto& value : values) moved.push_back(to_device(value, device));
  return moved;
}

template <class First, class Second>
std::pair<First, Second> to_device(const std::pair<First, Second>& pair, const torch::Device& device) {
  return {to_device(pair.first, device), to_device(pair.second, device)};
}

template <class... Elements>
std::tuple<Elements...> to_device(const std::tuple<Elements...>& tuple, const torch::Device& device) {
  return std::apply(
      [&device](const auto&... elements) { return std::tuple<Elements...>(to_device(elements, device)...); }, tuple);
}

template <class T>
c10::optional<T> to_device(const c10::optional<T>& value, const torch::Device& device) {
  if (!value.has_value()) return value;
  return c10::optional<T>(to_device(*value, device));
}

template <class T>
T to_device(const T& value, const torch::Device& /*device*/) {
  if constexpr (std::is_arithmetic<T>::value || std::is_enum<T>::value || std::is_same<T, std::string>::value) {
    return value;
  } else {
    static_assert(detail::always_false<T>::value,
                  "fabric::to_device: no overload for this batch type. Declare "
                  "`T to_device(const T& batch, const torch::Device& device)` in the "
                  "namespace of your batch type T (see fabric/to_device.h).");
    return value;
  }
}

namespace detail {
// The call the loaders make: unqualified, so that ADL finds user overloads.
template <class T>
T move_batch_to_device(const T& batch, const torch::Device& device) {
  return to_device(batch, device);
}
}  // namespace detail

}  // namespace fabric
