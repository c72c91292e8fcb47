#include "utils/config.h"

#include <stdexcept>

namespace utils {

Config::Config(std::map<std::string, std::string> defaults) : values_(std::move(defaults)) {}

void Config::parse_args(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    if (eq == std::string::npos) continue;
    values_[arg.substr(0, eq)] = arg.substr(eq + 1);
  }
}

std::string Config::get(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw std::runtime_error("config: no key '" + key + "'");
  return it->second;
}

int Config::get_int(const std::string& key) const { return std::stoi(get(key)); }
double Config::get_float(const std::string& key) const { return std::stod(get(key)); }
bool Config::get_bool(const std::string& key) const {
  const auto v = get(key);
  return v == "1" || v == "true" || v == "yes";
}
void Config::set(const std::string& key, const std::string& value) { values_[key] = value; }
bool Config::has(const std::string& key) const { return values_.count(key) > 0; }

void Config::dump(std::ostream& out) const {
  for (const auto& [key, value] : values_) out << key << '=' << value << '\n';
}

}  // namespace utils
