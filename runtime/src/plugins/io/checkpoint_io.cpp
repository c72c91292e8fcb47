// The default CheckpointIO plugin (checkpoint_io.h): files written
// atomically, the CRC-32 of every record checked.
#include <fabric/types.h>

#include "plugins/io/checkpoint_io.h"

#include "plugins/io/checkpoint_load.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace fabric {

namespace detail {

// A fixed name, so that a save interrupted by a crash leaves one stale file
// that the next save replaces, not one per process id.
std::string temporary_path_for(const std::string& path) { return path + ".tmp"; }

namespace {
[[noreturn]] void throw_file_error(const std::string& what, const std::string& path, int error) {
  throw std::runtime_error("fabric: cannot " + what + " '" + path + "': " + std::strerror(error));
}

std::string directory_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}
}  // namespace

// LibTorch's archive reader does not check the CRC-32 its writer stores for
// every record (miniz is built with MINIZ_DISABLE_ZIP_READER_CRC32_CHECKS), so
// a checkpoint with flipped bytes inside a tensor would load as garbage.
// Checked here before any load: every stored record's CRC-32 against the
// central directory (zip64 included). A file that is not a zip archive is left
// to the reader, whose error says so.
namespace {
uint32_t crc32_update(uint32_t crc, const unsigned char* data, size_t size) {
  static const auto table = [] {
    std::array<uint32_t, 256> entries{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      entries[i] = c;
    }
    return entries;
  }();
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint64_t little_endian(const unsigned char* bytes, int count) {
  uint64_t value = 0;
  for (int i = count - 1; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}
}  // namespace

namespace {

// A zip archive's stored records (LibTorch's checkpoint format), each read
// whole and checked against the CRC-32 its central directory holds.
class ZipCrcCheck {
 public:
  explicit ZipCrcCheck(const std::string& path) : path_(path), file_(path, std::ios::binary) {}
  void run();

 private:
  struct Directory {
    uint64_t entries = 0;
    uint64_t size = 0;
    uint64_t offset = 0;
  };
  struct Record {
    std::string name;
    uint64_t method = 0;
    uint32_t crc = 0;
    uint64_t compressed = 0;
    uint64_t local = 0;
  };
  [[noreturn]] void damaged(const std::string& why) const {
    throw CheckpointError("fabric::load: '" + path_ + "' is not a readable checkpoint (truncated or corrupted?): " +
                          why + ". Restore a good copy, or delete it to start without it");
  }
  std::vector<unsigned char> read_at(uint64_t offset, uint64_t count);
  // The central directory, from the end-of-central-directory record (and
  // its zip64 form); false when the file is no zip archive.
  bool find_directory(Directory& directory);
  // The central directory's entry at `at`, which moves past it.
  Record entry_at(const std::vector<unsigned char>& directory, uint64_t& at);
  void check(const Record& record, std::vector<unsigned char>& buffer);

  std::string path_;
  std::ifstream file_;
  uint64_t size_ = 0;
};

std::vector<unsigned char> ZipCrcCheck::read_at(uint64_t offset, uint64_t count) {
  std::vector<unsigned char> bytes(count);
  if (offset + count > size_) damaged("a zip record points past the end of the file");
  file_.seekg(static_cast<std::streamoff>(offset));
  file_.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(count));
  if (!file_) damaged("cannot read the file");
  return bytes;
}

bool ZipCrcCheck::find_directory(Directory& directory) {
  // The end-of-central-directory record: within the last 64 KiB + 22 bytes.
  const uint64_t tail_size = std::min<uint64_t>(size_, 65557);
  const auto tail = read_at(size_ - tail_size, tail_size);
  int64_t end = -1;
  for (int64_t i = static_cast<int64_t>(tail_size) - 22; i >= 0; --i) {
    if (little_endian(&tail[i], 4) == 0x06054b50) {
      end = i;
      break;
    }
  }
  if (end < 0) return false;
  directory.entries = little_endian(&tail[end + 10], 2);
  directory.size = little_endian(&tail[end + 12], 4);
  directory.offset = little_endian(&tail[end + 16], 4);
  const uint64_t end_offset = size_ - tail_size + static_cast<uint64_t>(end);
  if ((directory.entries == 0xFFFF || directory.offset == 0xFFFFFFFF) && end_offset >= 20) {
    const auto locator = read_at(end_offset - 20, 20);
    if (little_endian(&locator[0], 4) == 0x07064b50) {
      const auto record = read_at(little_endian(&locator[8], 8), 56);
      if (little_endian(&record[0], 4) != 0x06064b50) damaged("bad zip64 end record");
      directory.entries = little_endian(&record[32], 8);
      directory.size = little_endian(&record[40], 8);
      directory.offset = little_endian(&record[48], 8);
    }
  }
  return true;
}

ZipCrcCheck::Record ZipCrcCheck::entry_at(const std::vector<unsigned char>& directory, uint64_t& at) {
  if (at + 46 > directory.size() || little_endian(&directory[at], 4) != 0x02014b50) {
    damaged("bad zip central directory");
  }
  const unsigned char* header = &directory[at];
  Record record;
  record.method = little_endian(header + 10, 2);
  record.crc = static_cast<uint32_t>(little_endian(header + 16, 4));
  record.compressed = little_endian(header + 20, 4);
  uint64_t uncompressed = little_endian(header + 24, 4);
  const uint64_t name_length = little_endian(header + 28, 2);
  const uint64_t extra_length = little_endian(header + 30, 2);
  const uint64_t comment_length = little_endian(header + 32, 2);
  record.local = little_endian(header + 42, 4);
  if (at + 46 + name_length + extra_length > directory.size()) damaged("bad zip central directory");
  record.name.assign(reinterpret_cast<const char*>(header + 46), name_length);
  // zip64: the 8-byte values of the fields that hold 0xFFFFFFFF, in order.
  for (uint64_t x = 0; x + 4 <= extra_length;) {
    const unsigned char* field = header + 46 + name_length + x;
    const uint64_t id = little_endian(field, 2), length = little_endian(field + 2, 2);
    if (id == 0x0001) {
      uint64_t position = 4;
      for (uint64_t* value : {&uncompressed, &record.compressed, &record.local}) {
        if (*value == 0xFFFFFFFF && position + 8 <= 4 + length) {
          *value = little_endian(field + position, 8);
          position += 8;
        }
      }
    }
    x += 4 + length;
  }
  at += 46 + name_length + extra_length + comment_length;
  return record;
}

void ZipCrcCheck::check(const Record& record, std::vector<unsigned char>& buffer) {
  const auto local_header = read_at(record.local, 30);
  if (little_endian(&local_header[0], 4) != 0x04034b50) damaged("bad zip record '" + record.name + "'");
  uint64_t offset = record.local + 30 + little_endian(&local_header[26], 2) + little_endian(&local_header[28], 2);
  if (offset + record.compressed > size_) damaged("record '" + record.name + "' is cut off");
  file_.seekg(static_cast<std::streamoff>(offset));
  uint32_t actual = 0;
  for (uint64_t left = record.compressed; left > 0;) {
    const uint64_t chunk = std::min<uint64_t>(left, buffer.size());
    file_.read(reinterpret_cast<char*>(buffer.data()), static_cast<std::streamsize>(chunk));
    if (!file_) damaged("cannot read record '" + record.name + "'");
    actual = crc32_update(actual, buffer.data(), chunk);
    left -= chunk;
  }
  if (actual != record.crc) damaged("record '" + record.name + "' fails its CRC-32 check");
}

void ZipCrcCheck::run() {
  if (!file_) return;  // the reader reports it
  file_.seekg(0, std::ios::end);
  size_ = static_cast<uint64_t>(file_.tellg());
  Directory found;
  if (!find_directory(found)) return;  // not a zip archive: the reader says so
  const auto directory = read_at(found.offset, found.size);
  std::vector<unsigned char> buffer(1 << 20);
  uint64_t at = 0;
  for (uint64_t entry = 0; entry < found.entries; ++entry) {
    const Record record = entry_at(directory, at);
    if (record.method != 0) continue;  // LibTorch stores records uncompressed
    check(record, buffer);
  }
}

}  // namespace

void verify_checkpoint_checksums(const std::string& path) { ZipCrcCheck(path).run(); }

// The default CheckpointIO::write (below).
void write_file_atomically(const std::string& path, const std::string& bytes) {
  const std::string temporary = temporary_path_for(path);
  // Whatever is at the temporary name (a stale file, or a symlink someone
  // planted) is removed, never followed; O_EXCL|O_NOFOLLOW then refuses
  // anything that appears there in between.
  if (::unlink(temporary.c_str()) != 0 && errno != ENOENT) {
    throw_file_error("remove the old temporary file", temporary, errno);
  }
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw_file_error("create", temporary, errno);
  const char* data = bytes.data();
  size_t left = bytes.size();
  int error = 0;
  while (left > 0 && error == 0) {
    const ssize_t written = ::write(fd, data, left);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      error = written < 0 ? errno : EIO;
      break;
    }
    data += written;
    left -= static_cast<size_t>(written);
  }
  // The data must be on disk before the rename makes it the checkpoint.
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    ::unlink(temporary.c_str());
    throw_file_error("write", temporary, error);
  }
  // Test hook: a window in which the process can be killed between writing
  // the temporary file and renaming it.
  if (const char* pause = std::getenv("FABRIC_TEST_PAUSE_BEFORE_RENAME_S")) {
    std::fprintf(stderr, "fabric: test hook: pausing before renaming %s\n", temporary.c_str());
    std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(pause)));
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    error = errno;
    ::unlink(temporary.c_str());
    if (error == EISDIR || error == ENOTEMPTY || error == EEXIST) {
      throw std::runtime_error("fabric: '" + path +
                               "' is a directory (a sharded checkpoint written under fsdp?), which a checkpoint of one "
                               "file does not replace: choose another path, or remove the directory");
    }
    throw std::runtime_error("fabric: cannot rename '" + temporary + "' to '" + path + "': " + std::strerror(error));
  }
  // Makes the rename itself durable.
  const int directory = ::open(directory_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory >= 0) {
    ::fsync(directory);
    ::close(directory);
  }
}

void CheckpointIO::write(const std::string& path, const std::string& bytes) const {
  write_file_atomically(path, bytes);
}

void CheckpointIO::verify(const std::string& path) const { verify_checkpoint_checksums(path); }

void CheckpointIO::open(const std::string& path, torch::serialize::InputArchive& archive, torch::Device device) const {
  open_checkpoint(path, archive, device);
}

}  // namespace detail
}  // namespace fabric
