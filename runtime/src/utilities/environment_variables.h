// Reading the variables launchers and schedulers set. Internal.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>

namespace fabric {
namespace detail {

// An integer variable; nullopt when unset, empty or not a number.
inline std::optional<long> integer_variable(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || end == text) return std::nullopt;
  return value;
}

inline std::string string_variable(const char* name, const std::string& fallback = "") {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::string(text) : fallback;
}

// The value of `name` as atoi reads it, `fallback` when unset or empty.
inline int environment_integer(const char* name, int fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::atoi(text) : fallback;
}

inline std::string environment_string(const char* name, const std::string& fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::string(text) : fallback;
}

}  // namespace detail
}  // namespace fabric
