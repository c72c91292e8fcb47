#pragma once
// A small CSV logger: one header, one row per call, flushed at once so a
// crashed run keeps its curve.
#include <fstream>
#include <string>
#include <vector>

namespace utils {

class CsvLogger {
 public:
  CsvLogger(const std::string& path, std::vector<std::string> columns);
  void write(const std::vector<double>& row);

 private:
  std::ofstream out_;
  size_t columns_;
};

// "12.3456" with a fixed number of decimals, for log lines.
std::string fmt(double value, int decimals = 4);

}  // namespace utils
