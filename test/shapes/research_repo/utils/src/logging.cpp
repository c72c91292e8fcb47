#include "utils/logging.h"

#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace utils {

CsvLogger::CsvLogger(const std::string& path, std::vector<std::string> columns)
    : out_(path), columns_(columns.size()) {
  if (!out_) throw std::runtime_error("cannot open " + path);
  for (size_t i = 0; i < columns.size(); ++i) out_ << (i ? "," : "") << columns[i];
  out_ << std::endl;
}

void CsvLogger::write(const std::vector<double>& row) {
  if (row.size() != columns_) throw std::runtime_error("CsvLogger: wrong number of columns");
  for (size_t i = 0; i < row.size(); ++i) out_ << (i ? "," : "") << row[i];
  out_ << std::endl;
}

std::string fmt(double value, int decimals) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(decimals) << value;
  return s.str();
}

}  // namespace utils
