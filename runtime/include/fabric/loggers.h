// Experiment loggers for Fabric::log / log_dict, laid out as Lightning's:
// <root_dir>/<name>/version_<N>/ with N the next free number unless given.
// Fabric calls them on global rank 0 only; nothing touches the disk before
// the first value is logged.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fabric {

using Metrics = std::vector<std::pair<std::string, double>>;

class Logger {
 public:
  virtual ~Logger() = default;
  // One row of values for `step` (Fabric passes the names in the caller's order).
  virtual void log_metrics(const Metrics& metrics, int64_t step) = 0;
  // Writes out anything buffered. Fabric calls it when it is destroyed.
  virtual void finalize() {}
  // <root_dir>/<name>/version_<N>; picks N on the first call.
  virtual std::string log_dir() = 0;
};

// Lightning's directory rules, shared by both loggers below.
class VersionedDirectory {
 public:
  VersionedDirectory(std::string root_dir, std::string name, std::optional<int> version);
  // Creates the directory (and its parents) the first time.
  const std::string& path();
  int version();

 private:
  std::string root_dir_;
  std::string name_;
  std::optional<int> version_;
  std::string path_;
};

// metrics.csv: a header "step,<names...>" and one row per log call. When a
// call brings a new name, the file is rewritten with the wider header (as
// Lightning does); a value a row lacks is left empty.
class CSVLogger : public Logger {
 public:
  explicit CSVLogger(std::string root_dir = "logs", std::string name = "lightning_logs",
                     std::optional<int> version = std::nullopt);
  void log_metrics(const Metrics& metrics, int64_t step) override;
  std::string log_dir() override { return directory_.path(); }

 private:
  void rewrite_file();
  void append_row(size_t row);
  VersionedDirectory directory_;
  std::vector<std::string> columns_;
  struct Row {
    int64_t step;
    std::vector<std::pair<size_t, double>> values;  // column index, value
  };
  std::vector<Row> rows_;
};

// TensorBoard event files (events.out.tfevents.<time>.<host>.<pid>.<n>):
// TFRecord framing with masked CRC32C around hand-encoded Event protobufs,
// a file_version event first, then one scalar summary per value.
class TensorBoardLogger : public Logger {
 public:
  explicit TensorBoardLogger(std::string root_dir = "logs", std::string name = "lightning_logs",
                             std::optional<int> version = std::nullopt);
  ~TensorBoardLogger() override;
  TensorBoardLogger(TensorBoardLogger&&) noexcept;
  TensorBoardLogger& operator=(TensorBoardLogger&&) = delete;
  void log_metrics(const Metrics& metrics, int64_t step) override;
  void finalize() override;
  std::string log_dir() override { return directory_.path(); }
  // The event file's path (opens it if needed).
  std::string event_file();

 private:
  void write_record(const std::string& event);
  VersionedDirectory directory_;
  std::string file_path_;
  std::FILE* file_ = nullptr;
};

namespace detail {
// CRC-32C (Castagnoli) and TensorFlow's mask of it; exposed for the tests.
uint32_t crc32c(const void* data, size_t size);
uint32_t masked_crc32c(const void* data, size_t size);
}  // namespace detail

}  // namespace fabric
