// The benches' "--name=value" arguments.
#pragma once

#include <cstdint>
#include <map>
#include <string>

class BenchArguments {
 public:
  BenchArguments(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      const std::string argument = argv[i];
      const auto equals = argument.find('=');
      if (argument.rfind("--", 0) == 0 && equals != std::string::npos) {
        values_[argument.substr(2, equals - 2)] = argument.substr(equals + 1);
      }
    }
  }
  std::string text(const std::string& name, const std::string& fallback) const {
    const auto found = values_.find(name);
    return found == values_.end() ? fallback : found->second;
  }
  int64_t integer(const std::string& name, int64_t fallback) const {
    const auto found = values_.find(name);
    return found == values_.end() ? fallback : std::stoll(found->second);
  }

 private:
  std::map<std::string, std::string> values_;
};
