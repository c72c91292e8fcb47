#include <fabric/loggers.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>

namespace fabric {
namespace detail {

namespace {
// Reflected Castagnoli polynomial.
constexpr uint32_t kCrc32cPolynomial = 0x82F63B78u;
// TensorFlow's record mask (tensorflow/core/lib/hash/crc32c.h).
constexpr uint32_t kMaskDelta = 0xa282ead8u;

struct Crc32cTable {
  uint32_t entries[256];
  Crc32cTable() {
    for (uint32_t byte = 0; byte < 256; ++byte) {
      uint32_t crc = byte;
      for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kCrc32cPolynomial : 0u);
      entries[byte] = crc;
    }
  }
};
}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  static const Crc32cTable table;
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) crc = table.entries[(crc ^ bytes[i]) & 0xFFu] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

}  // namespace detail

namespace {

void make_directories(const std::string& path) {
  std::string partial;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    partial = path.substr(0, slash);
    if (!partial.empty() && ::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      throw std::runtime_error("fabric: cannot create directory '" + partial + "': " + std::strerror(errno));
    }
    start = slash + 1;
  }
}

// ---- protobuf wire format, the few pieces an Event needs ----
void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7F) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}
void put_tag(std::string& out, uint32_t field, uint32_t wire_type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | wire_type);
}
template <class T>
void put_little_endian(std::string& out, T value) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // x86/ARM Linux: little endian already
  out.append(reinterpret_cast<const char*>(bytes), sizeof(T));
}
void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

// tensorflow.Event: wall_time = 1 (double), step = 2 (int64),
// file_version = 3 (string), summary = 5 (Summary).
std::string event_header(double wall_time, int64_t step) {
  std::string event;
  put_tag(event, 1, 1);
  put_little_endian(event, wall_time);
  if (step != 0) {
    put_tag(event, 2, 0);
    put_varint(event, static_cast<uint64_t>(step));
  }
  return event;
}

double seconds_since_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string format_value(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

// A CSV field, quoted when it needs to be.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

VersionedDirectory::VersionedDirectory(std::string root_dir, std::string name, std::optional<int> version)
    : root_dir_(std::move(root_dir)), name_(std::move(name)), version_(version) {}

int VersionedDirectory::version() {
  if (!version_) {
    // As Lightning: one past the largest existing version_<N>.
    int next = 0;
    const std::string parent = root_dir_ + "/" + name_;
    if (DIR* directory = ::opendir(parent.c_str())) {
      while (const dirent* entry = ::readdir(directory)) {
        const std::string entry_name = entry->d_name;
        if (entry_name.rfind("version_", 0) != 0) continue;
        const std::string number = entry_name.substr(8);
        if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos) continue;
        next = std::max(next, std::atoi(number.c_str()) + 1);
      }
      ::closedir(directory);
    }
    version_ = next;
  }
  return *version_;
}

const std::string& VersionedDirectory::path() {
  if (path_.empty()) {
    const std::string path = root_dir_ + "/" + name_ + "/version_" + std::to_string(version());
    make_directories(path);
    path_ = path;
  }
  return path_;
}

// ---- CSV ----

CSVLogger::CSVLogger(std::string root_dir, std::string name, std::optional<int> version)
    : directory_(std::move(root_dir), std::move(name), version) {}

void CSVLogger::log_metrics(const Metrics& metrics, int64_t step) {
  Row row{step, {}};
  bool new_column = false;
  for (const auto& [name, value] : metrics) {
    auto found = std::find(columns_.begin(), columns_.end(), name);
    if (found == columns_.end()) {
      columns_.push_back(name);
      found = columns_.end() - 1;
      new_column = true;
    }
    row.values.emplace_back(static_cast<size_t>(found - columns_.begin()), value);
  }
  rows_.push_back(std::move(row));
  if (new_column) {
    rewrite_file();
  } else {
    append_row(rows_.size() - 1);
  }
}

void CSVLogger::rewrite_file() {
  const std::string path = directory_.path() + "/metrics.csv";
  std::ofstream file(path, std::ios::trunc);
  if (!file) throw std::runtime_error("fabric::CSVLogger: cannot write '" + path + "'");
  file << "step";
  for (const auto& column : columns_) file << ',' << csv_field(column);
  file << '\n';
  file.close();
  for (size_t row = 0; row < rows_.size(); ++row) append_row(row);
}

void CSVLogger::append_row(size_t row_index) {
  const std::string path = directory_.path() + "/metrics.csv";
  std::ofstream file(path, std::ios::app);
  if (!file) throw std::runtime_error("fabric::CSVLogger: cannot write '" + path + "'");
  const Row& row = rows_[row_index];
  std::vector<std::string> cells(columns_.size());
  for (const auto& [column, value] : row.values) cells[column] = format_value(value);
  file << row.step;
  for (const auto& cell : cells) file << ',' << cell;
  file << '\n';
}

// ---- TensorBoard ----

TensorBoardLogger::TensorBoardLogger(std::string root_dir, std::string name, std::optional<int> version)
    : directory_(std::move(root_dir), std::move(name), version) {}

TensorBoardLogger::TensorBoardLogger(TensorBoardLogger&& other) noexcept
    : directory_(std::move(other.directory_)), file_path_(std::move(other.file_path_)), file_(other.file_) {
  other.file_ = nullptr;
}

TensorBoardLogger::~TensorBoardLogger() { finalize(); }

std::string TensorBoardLogger::event_file() {
  if (file_ == nullptr) {
    static int files_opened = 0;  // several loggers in one second, one process
    char host[256] = "localhost";
    ::gethostname(host, sizeof host - 1);
    file_path_ = directory_.path() + "/events.out.tfevents." +
                 std::to_string(static_cast<int64_t>(seconds_since_epoch())) + "." + host + "." +
                 std::to_string(::getpid()) + "." + std::to_string(files_opened++);
    file_ = std::fopen(file_path_.c_str(), "wb");
    if (file_ == nullptr) {
      throw std::runtime_error("fabric::TensorBoardLogger: cannot create '" + file_path_ +
                               "': " + std::strerror(errno));
    }
    std::string event = event_header(seconds_since_epoch(), 0);
    put_bytes(event, 3, "brain.Event:2");
    write_record(event);
  }
  return file_path_;
}

void TensorBoardLogger::log_metrics(const Metrics& metrics, int64_t step) {
  event_file();
  for (const auto& [name, value] : metrics) {
    // Summary.Value: tag = 1 (string), simple_value = 2 (float).
    std::string summary_value;
    put_bytes(summary_value, 1, name);
    put_tag(summary_value, 2, 5);
    put_little_endian(summary_value, static_cast<float>(value));
    std::string summary;  // Summary: value = 1 (repeated Value)
    put_bytes(summary, 1, summary_value);
    std::string event = event_header(seconds_since_epoch(), step);
    put_bytes(event, 5, summary);
    write_record(event);
  }
  std::fflush(file_);
}

void TensorBoardLogger::write_record(const std::string& event) {
  // TFRecord: length, masked CRC of the length, data, masked CRC of the data.
  std::string record;
  const uint64_t length = event.size();
  put_little_endian(record, length);
  put_little_endian(record, detail::masked_crc32c(record.data(), sizeof length));
  record += event;
  put_little_endian(record, detail::masked_crc32c(event.data(), event.size()));
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    throw std::runtime_error("fabric::TensorBoardLogger: cannot write '" + file_path_ + "'");
  }
}

void TensorBoardLogger::finalize() {
  if (file_ != nullptr) {
    std::fclose(file_);
    file_ = nullptr;
  }
}

}  // namespace fabric
