#pragma once
// Experiment configuration: typed defaults overridden by `key=value`
// arguments, the way every project of this repository reads its settings.
#include <map>
#include <ostream>
#include <string>

namespace utils {

class Config {
 public:
  Config() = default;
  explicit Config(std::map<std::string, std::string> defaults);

  // Overrides from the command line (`lr=1e-3 max_steps=200`); anything
  // without an '=' is ignored.
  void parse_args(int argc, char** argv);

  std::string get(const std::string& key) const;
  int get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  void set(const std::string& key, const std::string& value);
  bool has(const std::string& key) const;

  void dump(std::ostream& out) const;

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace utils
