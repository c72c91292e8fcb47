// Checkpoint IO: files written atomically (a temporary, fsync, rename),
// integrity checks of what LibTorch's archive writer stores (CRC-32 of every
// record), and fabric::State: save and load of a whole training state.
#include <fabric/fabric.h>

#include "fabric_state.h"

#include "checkpoint_format.h"
#include "checkpoint_load.h"

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

using detail::entry_key;
using detail::kFormatKey;
using detail::kFormatVersion;
using detail::kGrowthTrackerKey;
using detail::kKindsKey;
using detail::kNamesKey;
using detail::kScaleKey;
using detail::read_string_list;
using detail::SchedulerSteps;

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

void verify_checkpoint_checksums(const std::string& path) {
  const auto damaged = [&path](const std::string& why) {
    throw CheckpointError("fabric::load: '" + path + "' is not a readable checkpoint (truncated or corrupted?): " +
                          why + ". Restore a good copy, or delete it to start without it");
  };
  std::ifstream file(path, std::ios::binary);
  if (!file) return;  // the reader reports it
  file.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(file.tellg());
  const auto read_at = [&](uint64_t offset, uint64_t count) {
    std::vector<unsigned char> bytes(count);
    if (offset + count > size) damaged("a zip record points past the end of the file");
    file.seekg(static_cast<std::streamoff>(offset));
    file.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(count));
    if (!file) damaged("cannot read the file");
    return bytes;
  };
  // The end-of-central-directory record: within the last 64 KiB + 22 bytes.
  const uint64_t tail_size = std::min<uint64_t>(size, 65557);
  const auto tail = read_at(size - tail_size, tail_size);
  int64_t end = -1;
  for (int64_t i = static_cast<int64_t>(tail_size) - 22; i >= 0; --i) {
    if (little_endian(&tail[i], 4) == 0x06054b50) {
      end = i;
      break;
    }
  }
  if (end < 0) return;  // not a zip archive: the reader says so
  uint64_t entries = little_endian(&tail[end + 10], 2);
  uint64_t directory_size = little_endian(&tail[end + 12], 4);
  uint64_t directory_offset = little_endian(&tail[end + 16], 4);
  const uint64_t end_offset = size - tail_size + static_cast<uint64_t>(end);
  if ((entries == 0xFFFF || directory_offset == 0xFFFFFFFF) && end_offset >= 20) {
    const auto locator = read_at(end_offset - 20, 20);
    if (little_endian(&locator[0], 4) == 0x07064b50) {
      const auto record = read_at(little_endian(&locator[8], 8), 56);
      if (little_endian(&record[0], 4) != 0x06064b50) damaged("bad zip64 end record");
      entries = little_endian(&record[32], 8);
      directory_size = little_endian(&record[40], 8);
      directory_offset = little_endian(&record[48], 8);
    }
  }
  const auto directory = read_at(directory_offset, directory_size);
  std::vector<unsigned char> buffer(1 << 20);
  uint64_t at = 0;
  for (uint64_t entry = 0; entry < entries; ++entry) {
    if (at + 46 > directory.size() || little_endian(&directory[at], 4) != 0x02014b50) {
      damaged("bad zip central directory");
    }
    const unsigned char* header = &directory[at];
    const uint64_t method = little_endian(header + 10, 2);
    const uint32_t crc = static_cast<uint32_t>(little_endian(header + 16, 4));
    uint64_t compressed = little_endian(header + 20, 4);
    uint64_t uncompressed = little_endian(header + 24, 4);
    const uint64_t name_length = little_endian(header + 28, 2);
    const uint64_t extra_length = little_endian(header + 30, 2);
    const uint64_t comment_length = little_endian(header + 32, 2);
    uint64_t local = little_endian(header + 42, 4);
    if (at + 46 + name_length + extra_length > directory.size()) damaged("bad zip central directory");
    const std::string name(reinterpret_cast<const char*>(header + 46), name_length);
    // zip64: the 8-byte values of the fields that hold 0xFFFFFFFF, in order.
    for (uint64_t x = 0; x + 4 <= extra_length;) {
      const unsigned char* field = header + 46 + name_length + x;
      const uint64_t id = little_endian(field, 2), length = little_endian(field + 2, 2);
      if (id == 0x0001) {
        uint64_t position = 4;
        for (uint64_t* value : {&uncompressed, &compressed, &local}) {
          if (*value == 0xFFFFFFFF && position + 8 <= 4 + length) {
            *value = little_endian(field + position, 8);
            position += 8;
          }
        }
      }
      x += 4 + length;
    }
    at += 46 + name_length + extra_length + comment_length;
    if (method != 0) continue;  // LibTorch stores records uncompressed
    const auto local_header = read_at(local, 30);
    if (little_endian(&local_header[0], 4) != 0x04034b50) damaged("bad zip record '" + name + "'");
    uint64_t offset = local + 30 + little_endian(&local_header[26], 2) + little_endian(&local_header[28], 2);
    if (offset + compressed > size) damaged("record '" + name + "' is cut off");
    file.seekg(static_cast<std::streamoff>(offset));
    uint32_t actual = 0;
    for (uint64_t left = compressed; left > 0;) {
      const uint64_t chunk = std::min<uint64_t>(left, buffer.size());
      file.read(reinterpret_cast<char*>(buffer.data()), static_cast<std::streamsize>(chunk));
      if (!file) damaged("cannot read record '" + name + "'");
      actual = crc32_update(actual, buffer.data(), chunk);
      left -= chunk;
    }
    if (actual != crc) damaged("record '" + name + "' fails its CRC-32 check");
  }
}

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

}  // namespace detail

// ---- checkpoints of the whole state ----------------------------------------

std::vector<std::string> detail::read_string_list(torch::serialize::InputArchive& archive, const char* key,
                                                  const std::string& path) {
  c10::IValue value;
  if (!archive.try_read(key, value) || !value.isList()) {
    throw CheckpointError("fabric::load: '" + path + "' is not a fabric::State checkpoint (no '" + key +
                          "'); was it written by fabric.save(path, object)? Load it with "
                          "fabric.load(path, object) then");
  }
  std::vector<std::string> strings;
  for (const auto& item : value.toListRef()) strings.push_back(item.toStringRef());
  return strings;
}

const char* StateEntry::kind() const noexcept {
  static const char* const kNames[] = {"module", "optimizer", "tensor", "int64",     "int32",  "double",
                                       "float",  "bool",      "string", "scheduler", "loader", "random_state"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == std::variant_size<Target>::value,
                "a name for every kind of entry");
  if (const auto* const* stateful = std::get_if<detail::StatefulEntry*>(&target_)) return (*stateful)->kind();
  return kNames[target_.index()];
}

#ifdef FABRIC_HAS_PLATEAU_SCHEDULER
namespace detail {
namespace {

// A pointer to a private member, taken where access is not checked (an
// explicit instantiation's arguments), and handed out by a friend.
template <class Tag, typename Tag::Member Pointer>
struct PrivateMember {
  friend typename Tag::Member member(Tag) { return Pointer; }
};
using Plateau = torch::optim::ReduceLROnPlateauScheduler;
// One tag per member (Id), of its type T; each declares its own plain
// friend function (which GCC's -Wnon-template-friend asks about).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-template-friend"
#endif
template <class T, int Id>
struct PlateauField {
  using Member = T Plateau::*;
  friend Member member(PlateauField);
};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
using PlateauBest = PlateauField<float, 0>;
using PlateauBadEpochs = PlateauField<int, 1>;
using PlateauCooldown = PlateauField<int, 2>;
using PlateauLastEpoch = PlateauField<int, 3>;
template struct PrivateMember<PlateauBest, &Plateau::best>;
template struct PrivateMember<PlateauBadEpochs, &Plateau::num_bad_epochs>;
template struct PrivateMember<PlateauCooldown, &Plateau::cooldown_counter>;
template struct PrivateMember<PlateauLastEpoch, &Plateau::last_epoch>;

class PlateauSchedulerState final : public StatefulEntry {
 public:
  explicit PlateauSchedulerState(Plateau& scheduler) : scheduler_(scheduler) {}
  void save_state(torch::serialize::OutputArchive& archive) const override {
    archive.write("best", c10::IValue(static_cast<double>(scheduler_.*member(PlateauBest()))));
    archive.write("num_bad_epochs", c10::IValue(static_cast<int64_t>(scheduler_.*member(PlateauBadEpochs()))));
    archive.write("cooldown_counter", c10::IValue(static_cast<int64_t>(scheduler_.*member(PlateauCooldown()))));
    archive.write("last_epoch", c10::IValue(static_cast<int64_t>(scheduler_.*member(PlateauLastEpoch()))));
  }
  void load_state(torch::serialize::InputArchive& archive) override {
    c10::IValue best, bad, cooldown, last;
    archive.read("best", best);
    archive.read("num_bad_epochs", bad);
    archive.read("cooldown_counter", cooldown);
    archive.read("last_epoch", last);
    scheduler_.*member(PlateauBest()) = static_cast<float>(best.toDouble());
    scheduler_.*member(PlateauBadEpochs()) = static_cast<int>(bad.toInt());
    scheduler_.*member(PlateauCooldown()) = static_cast<int>(cooldown.toInt());
    scheduler_.*member(PlateauLastEpoch()) = static_cast<int>(last.toInt());
  }
  const char* kind() const override { return "plateau_scheduler"; }

 private:
  Plateau& scheduler_;
};

}  // namespace

std::shared_ptr<StatefulEntry> plateau_scheduler_state(torch::optim::ReduceLROnPlateauScheduler& scheduler) {
  return std::make_shared<PlateauSchedulerState>(scheduler);
}

}  // namespace detail
#endif

namespace {

torch::Tensor generator_state(at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_generator_state(at::Generator generator, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

}  // namespace

namespace {

bool has_random_state(const State& state) {
  for (const auto& entry : state.entries()) {
    if (std::holds_alternative<RandomState>(entry.target())) return true;
  }
  return false;
}

// Every rank's `text` on every rank (as int64 values: every backend
// gathers those).
std::vector<std::string> gather_texts(Fabric& fabric, const std::string& text) {
  auto values = torch::empty({static_cast<int64_t>(text.size())}, torch::kLong);
  for (size_t i = 0; i < text.size(); ++i) values[static_cast<int64_t>(i)] = static_cast<unsigned char>(text[i]);
  std::vector<std::string> texts;
  for (const auto& gathered : fabric.all_gather(values.to(fabric.device()))) {
    const auto bytes = gathered.cpu().to(torch::kByte).contiguous();
    texts.emplace_back(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()), static_cast<size_t>(bytes.numel()));
  }
  return texts;
}

}  // namespace

detail::RandomStates detail::gather_random_states(Fabric& fabric, const State& state) {
  RandomStates states;
  states.world_size = fabric.world_size();
  for (size_t index = 0; index < state.entries().size(); ++index) {
    const auto* stateful = std::get_if<StatefulEntry*>(&state.entries()[index].target());
    if (stateful != nullptr && (*stateful)->per_rank()) {
      states.per_rank[index] = gather_texts(fabric, (*stateful)->per_rank_text());
    }
  }
  if (!has_random_state(state)) return states;
  states.world_size = fabric.world_size();
  // As int64: every backend gathers it.
  const auto gather = [&fabric](const torch::Tensor& state) {
    std::vector<torch::Tensor> all;
    for (const auto& tensor : fabric.all_gather(state.to(torch::kLong).to(fabric.device()))) {
      all.push_back(tensor.cpu().to(torch::kByte));
    }
    return all;
  };
  states.cpu = gather(generator_state(at::detail::getDefaultCPUGenerator()));
  if (fabric.device().is_cuda()) {
    states.cuda = gather(generator_state(at::globalContext().defaultGenerator(fabric.device())));
  }
  return states;
}

State::State(std::initializer_list<StateEntry> entries) {
  for (const auto& entry : entries) add(entry);
}

State& State::add(StateEntry entry) {
  for (const auto& existing : entries_) {
    if (existing.name() == entry.name()) {
      throw std::invalid_argument("fabric::State: the name '" + entry.name() + "' appears twice");
    }
  }
  entries_.push_back(std::move(entry));
  return *this;
}

std::shared_ptr<void> Fabric::hold_parameters_readable() {
  auto undo = state_->collective("fabric.save()", [&] { return state_->strategy->make_parameters_readable(); });
  if (!undo) return nullptr;
  return std::shared_ptr<void>(nullptr, [undo](void*) { undo(); });
}

void Fabric::finish_save(const std::string& path, const std::string& error_on_rank_zero) {
  detail::FabricState::MonitorScope scope(state_->monitor.get(), "fabric.save()");
  // Doubles as the barrier after the write: no rank returns before the file
  // is in place, and a failure on rank 0 throws on every rank.
  const std::string error = broadcast(error_on_rank_zero, 0);
  if (!error.empty()) {
    throw CheckpointError("fabric::save: rank 0 could not write '" + path + "': " + error);
  }
}

void Fabric::load_module_file(const std::string& path, torch::nn::Module& module) {
  detail::FabricState::MonitorScope scope(state_->monitor.get(), "fabric.load()");
  detail::TensorCopies copies;
  const auto check = [&] {
    torch::serialize::InputArchive archive;
    detail::open_checkpoint(path, archive, device());
    detail::collect_module_tensors(module, archive, "", copies);
  };
  detail::agree_on_load(*this, detail::load_error_of(path, check));
  detail::copy_module_tensors(copies);
  state_->strategy->module_loaded(module);
}

void Fabric::load_other_file(const std::string& path, const std::function<void(const std::string&)>& read) {
  detail::FabricState::MonitorScope scope(state_->monitor.get(), "fabric.load()");
  const auto load = [&] {
    torch::serialize::InputArchive archive;
    detail::open_checkpoint(path, archive, device());
    try {
      read(path);
    } catch (const std::exception& error) {
      throw CheckpointError("fabric::load: '" + path + "': " + detail::first_line_of(detail::message_of(error)) +
                            " (does the file hold what is loaded into?)");
    }
  };
  detail::agree_on_load(*this, detail::load_error_of(path, load));
}

void Fabric::save_optimizer_file(const std::string& path, torch::optim::Optimizer& optimizer) {
  state_->strategy->check_in_sync("fabric.save()");
  auto undo = state_->collective("fabric.save()", [&] { return state_->strategy->gather_optimizer_state(optimizer); });
  struct Undo {
    std::function<void()>& step;
    ~Undo() {
      if (step) step();
    }
  } undo_at_exit{undo};
  save_with(path, [&optimizer](std::ostream& stream) { torch::save(optimizer, stream); });
}

void Fabric::load_optimizer_file(const std::string& path, torch::optim::Optimizer& optimizer) {
  detail::FabricState::MonitorScope scope(state_->monitor.get(), "fabric.load()");
  torch::serialize::InputArchive archive;
  const auto open = [&] { detail::open_checkpoint(path, archive, device()); };
  detail::agree_on_load(*this, detail::load_error_of(path, open));
  // An optimizer checks its state while it reads it: agreed on separately.
  const auto load = [&] {
    try {
      optimizer.load(archive);
    } catch (const std::exception& error) {
      throw CheckpointError("fabric::load: '" + path + "': cannot load the optimizer from it: " +
                            detail::first_line_of(detail::message_of(error)) +
                            " (was it saved from this optimizer type, over the same parameters?)");
    }
  };
  detail::agree_on_load(*this, detail::load_error_of(path, load));
  state_->strategy->optimizer_loaded(optimizer);
}

void detail::write_state_archive(torch::serialize::OutputArchive& archive, const State& state,
                                 const FabricState::LossScaler& scaler, const RandomStates& random_states,
                                 const StateWriting& writing) {
  c10::List<std::string> names;
  c10::List<std::string> kinds;
  for (size_t index = 0; index < state.entries().size(); ++index) {
    const StateEntry& entry = state.entries()[index];
    names.push_back(entry.name());
    kinds.push_back(entry.kind());
    const std::string key = entry_key(index);
    std::visit(
        [&](const auto& target) {
          using Target = std::decay_t<decltype(target)>;
          constexpr bool sharded_kind = std::is_same<Target, std::shared_ptr<torch::nn::Module>>::value ||
                                        std::is_same<Target, torch::optim::Optimizer*>::value;
          if (!sharded_kind && !writing.all_entries) return;
          if constexpr (std::is_same<Target, std::shared_ptr<torch::nn::Module>>::value) {
            torch::serialize::OutputArchive nested;
            writing.write_module(*target, nested);
            archive.write(key, nested);
          } else if constexpr (std::is_same<Target, torch::optim::Optimizer*>::value) {
            torch::serialize::OutputArchive nested;
            target->save(nested);
            archive.write(key, nested);
          } else if constexpr (std::is_same<Target, torch::Tensor*>::value) {
            archive.write(key, *target, /*is_buffer=*/true);
          } else if constexpr (std::is_same<Target, torch::optim::LRScheduler*>::value) {
            archive.write(key, c10::IValue(static_cast<int64_t>(SchedulerSteps::of(*target))));
          } else if constexpr (std::is_same<Target, detail::StatefulEntry*>::value) {
            torch::serialize::OutputArchive nested;
            if (target->per_rank()) {
              const auto found = random_states.per_rank.find(index);
              c10::List<std::string> texts;
              if (found != random_states.per_rank.end())
                for (const auto& text : found->second) texts.push_back(text);
              nested.write("world_size", c10::IValue(static_cast<int64_t>(texts.size())));
              nested.write("ranks", c10::IValue(texts));
            } else {
              target->save_state(nested);
            }
            archive.write(key, nested);
          } else if constexpr (std::is_same<Target, RandomState>::value) {
            torch::serialize::OutputArchive nested;
            nested.write("world_size", c10::IValue(random_states.world_size));
            for (size_t rank = 0; rank < random_states.cpu.size(); ++rank) {
              nested.write("cpu_" + std::to_string(rank), random_states.cpu[rank], /*is_buffer=*/true);
            }
            for (size_t rank = 0; rank < random_states.cuda.size(); ++rank) {
              nested.write("cuda_" + std::to_string(rank), random_states.cuda[rank], /*is_buffer=*/true);
            }
            archive.write(key, nested);
          } else if constexpr (std::is_same<Target, int32_t*>::value) {
            archive.write(key, c10::IValue(static_cast<int64_t>(*target)));
          } else if constexpr (std::is_same<Target, float*>::value) {
            archive.write(key, c10::IValue(static_cast<double>(*target)));
          } else {
            archive.write(key, c10::IValue(*target));
          }
        },
        entry.target());
  }
  if (!writing.all_entries) return;
  if (scaler.active) {
    archive.write(kScaleKey, c10::IValue(scaler.scale));
    archive.write(kGrowthTrackerKey, c10::IValue(scaler.growth_tracker));
  }
  archive.write(kFormatKey, c10::IValue(kFormatVersion));
  archive.write(kNamesKey, c10::IValue(names));
  archive.write(kKindsKey, c10::IValue(kinds));
}

void Fabric::save(const std::string& path, const State& state) {
  const auto& scaler = state_->scaler;
  state_->strategy->check_in_sync("fabric.save()");
  // fsdp: each rank writes its own part (checkpoint_sharded.cpp).
  if (saves_sharded()) {
    save_sharded(path, state);
    return;
  }
  // Sharded strategies: rank 0's optimizers hold the whole state while it
  // writes (the same file a ddp run writes), and only their own afterwards.
  std::vector<std::function<void()>> undo;
  struct Undo {
    std::vector<std::function<void()>>& steps;
    ~Undo() {
      for (auto& step : steps) {
        if (step) step();
      }
    }
  } undo_at_exit{undo};
  for (const auto& entry : state.entries()) {
    if (auto* const* optimizer = std::get_if<torch::optim::Optimizer*>(&entry.target())) {
      undo.push_back(
          state_->collective("fabric.save()", [&] { return state_->strategy->gather_optimizer_state(**optimizer); }));
    }
  }
  // Every rank's generators, gathered by every rank before rank 0 writes.
  detail::RandomStates random_states;
  random_states = detail::gather_random_states(*this, state);
  save_with(path, [&state, &scaler, &random_states](std::ostream& stream) {
    torch::serialize::OutputArchive archive;
    detail::write_state_archive(
        archive, state, scaler, random_states,
        {[](const torch::nn::Module& module, torch::serialize::OutputArchive& nested) { module.save(nested); }, true});
    archive.save_to(stream);
  });
}

void Fabric::load(const std::string& path, const State& state, bool strict) {
  // A sharded checkpoint (fsdp) is a directory, loaded by any strategy on
  // any number of ranks (checkpoint_sharded.cpp).
  if (detail::is_sharded_checkpoint(path)) {
    load_sharded(path, state, strict);
    return;
  }
  detail::FabricState::MonitorScope scope(state_->monitor.get(), "fabric.load()");
  const auto fail = [&path](const std::string& why) -> void {
    throw CheckpointError("fabric::load: '" + path + "': " + why);
  };
  torch::serialize::InputArchive archive;
  std::vector<size_t> file_index_of_entry;
  // Module entries: their tensors, found and checked before anything is written.
  std::vector<detail::TensorCopies> module_copies(state.entries().size());
  // First everything that can be checked, agreed on by every rank before
  // the first write into the caller's objects; then the writes, agreed on
  // again (an optimizer checks its state only while it reads it).
  const auto check = [&] {
    detail::open_checkpoint(path, archive, device());
    c10::IValue format;
    if (!archive.try_read(kFormatKey, format) || !format.isInt()) {
      fail(
          "not a fabric::State checkpoint; was it written by fabric.save(path, object)? "
          "Then load it with fabric.load(path, object)");
    }
    if (format.toInt() > kFormatVersion) {
      fail("written by a newer Fabric (format " + std::to_string(format.toInt()) + ")");
    }
    const auto names = read_string_list(archive, kNamesKey, path);
    const auto kinds = read_string_list(archive, kKindsKey, path);
    if (names.size() != kinds.size()) fail("corrupted: names and kinds differ in number");

    std::vector<std::string> missing;
    for (const auto& entry : state.entries()) {
      const auto found = std::find(names.begin(), names.end(), entry.name());
      if (found == names.end()) {
        missing.push_back("'" + entry.name() + "'");
        continue;
      }
      const size_t index = static_cast<size_t>(found - names.begin());
      if (kinds[index] != entry.kind()) {
        fail("'" + entry.name() + "' holds a " + kinds[index] + " in the checkpoint, but a " + entry.kind() +
             " was passed to load it into");
      }
      file_index_of_entry.push_back(index);
    }
    const auto join = [](const std::vector<std::string>& items) {
      std::string text;
      for (size_t i = 0; i < items.size(); ++i) text += (i > 0 ? ", " : "") + items[i];
      return text;
    };
    if (!missing.empty()) {
      std::vector<std::string> held;
      for (const auto& name : names) held.push_back("'" + name + "'");
      fail("the checkpoint has no " + join(missing) + " (it holds: " + join(held) + ")");
    }
    if (strict) {
      std::vector<std::string> unknown;
      for (const auto& name : names) {
        bool requested = false;
        for (const auto& entry : state.entries()) requested = requested || entry.name() == name;
        if (!requested) unknown.push_back("'" + name + "'");
      }
      if (!unknown.empty()) {
        fail("the checkpoint also holds " + join(unknown) +
             ", which the state does not name (pass strict = false to ignore them)");
      }
    }
    for (size_t position = 0; position < state.entries().size(); ++position) {
      const StateEntry& entry = state.entries()[position];
      const auto* module = std::get_if<std::shared_ptr<torch::nn::Module>>(&entry.target());
      if (module == nullptr) continue;
      try {
        torch::serialize::InputArchive nested;
        archive.read(entry_key(file_index_of_entry[position]), nested);
        detail::collect_module_tensors(**module, nested, "", module_copies[position]);
      } catch (const std::exception& error) {
        fail("cannot load '" + entry.name() + "': " + detail::first_line_of(detail::message_of(error)));
      }
    }
  };
  const auto load_random_states = [&](torch::serialize::InputArchive& file, const std::string& key) {
    torch::serialize::InputArchive nested;
    file.read(key, nested);
    c10::IValue saved_world;
    nested.read("world_size", saved_world);
    if (saved_world.toInt() != world_size()) {
      if (is_global_zero()) {
        detail::write_stderr_line("fabric: note: '" + path + "' holds the random generator states of " +
                                  std::to_string(saved_world.toInt()) + " ranks, this job has " +
                                  std::to_string(world_size()) +
                                  ": the generators are left as they are (the run continues, not bit for bit)");
      }
      return;
    }
    const std::string rank = std::to_string(global_rank());
    torch::Tensor cpu;
    nested.read("cpu_" + rank, cpu, /*is_buffer=*/true);
    set_generator_state(at::detail::getDefaultCPUGenerator(), cpu.cpu());
    torch::Tensor cuda;
    if (device().is_cuda() && nested.try_read("cuda_" + rank, cuda, /*is_buffer=*/true)) {
      set_generator_state(at::globalContext().defaultGenerator(device()), cuda.cpu());
    }
  };
  const auto apply = [&] {
    if (state_->scaler.active) {
      c10::IValue scale;
      c10::IValue growth_tracker;
      if (archive.try_read(kScaleKey, scale) && archive.try_read(kGrowthTrackerKey, growth_tracker)) {
        state_->scaler.scale = scale.toDouble();
        state_->scaler.growth_tracker = growth_tracker.toInt();
      }
    }
    for (size_t position = 0; position < state.entries().size(); ++position) {
      const StateEntry& entry = state.entries()[position];
      const std::string key = entry_key(file_index_of_entry[position]);
      try {
        std::visit(
            [&](const auto& target) {
              using Target = std::decay_t<decltype(target)>;
              if constexpr (std::is_same<Target, std::shared_ptr<torch::nn::Module>>::value) {
                detail::copy_module_tensors(module_copies[position]);
                state_->strategy->module_loaded(*target);
              } else if constexpr (std::is_same<Target, torch::optim::Optimizer*>::value) {
                torch::serialize::InputArchive nested;
                archive.read(key, nested);
                target->load(nested);
                state_->strategy->optimizer_loaded(*target);
              } else if constexpr (std::is_same<Target, torch::Tensor*>::value) {
                torch::Tensor loaded;
                archive.read(key, loaded, /*is_buffer=*/true);
                *target = loaded;
              } else if constexpr (std::is_same<Target, torch::optim::LRScheduler*>::value) {
                c10::IValue steps;
                archive.read(key, steps);
                SchedulerSteps::of(*target) = static_cast<unsigned>(steps.toInt());
              } else if constexpr (std::is_same<Target, detail::StatefulEntry*>::value) {
                torch::serialize::InputArchive nested;
                archive.read(key, nested);
                if (target->per_rank()) {
                  const auto texts = read_string_list(nested, "ranks", path);
                  if (static_cast<int>(texts.size()) == world_size()) {
                    target->load_per_rank_text(texts[static_cast<size_t>(global_rank())]);
                  } else if (is_global_zero()) {
                    detail::write_stderr_line("fabric: note: '" + path + "' holds the states of '" + entry.name() +
                                              "' of " + std::to_string(texts.size()) + " ranks, this job has " +
                                              std::to_string(world_size()) +
                                              ": it is left as it is (the run continues, not bit for bit)");
                  }
                } else {
                  target->load_state(nested);
                }
              } else if constexpr (std::is_same<Target, RandomState>::value) {
                load_random_states(archive, key);
              } else {
                c10::IValue value;
                archive.read(key, value);
                if constexpr (std::is_same<Target, int64_t*>::value) {
                  *target = value.toInt();
                } else if constexpr (std::is_same<Target, int32_t*>::value) {
                  *target = static_cast<int32_t>(value.toInt());
                } else if constexpr (std::is_same<Target, double*>::value) {
                  *target = value.toDouble();
                } else if constexpr (std::is_same<Target, float*>::value) {
                  *target = static_cast<float>(value.toDouble());
                } else if constexpr (std::is_same<Target, bool*>::value) {
                  *target = value.toBool();
                } else {
                  *target = value.toStringRef();
                }
              }
            },
            entry.target());
      } catch (const std::exception& error) {
        fail("cannot load '" + entry.name() + "': " + detail::first_line_of(detail::message_of(error)));
      }
    }
  };
  detail::agree_on_load(*this, detail::load_error_of(path, check));
  detail::agree_on_load(*this, detail::load_error_of(path, apply));
}

}  // namespace fabric
