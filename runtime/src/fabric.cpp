#include <fabric/fabric.h>

#include "c10d_compat.h"
#include "checkpoint_load.h"
#include "job_monitor.h"
#include "launcher.h"
#include "rendezvous.h"
#include "strategy.h"
#include "sync_check.h"

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
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace fabric {
namespace detail {

namespace {
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

constexpr size_t kMiB = 1024 * 1024;
// PyTorch DDP's defaults.
constexpr size_t kBroadcastBucketBytes = 250 * kMiB;
// barrier(name) compares this many bytes of the names.
constexpr int64_t kBarrierNameBytes = 128;
// all_gather sends each rank's shape in a fixed-size header.
constexpr int64_t kMaxGatherDims = 16;
} // namespace

class FabricState {
 public:
  Options options;
  ProcessPlacement placement;
  JobLayout layout;  // who is where, once launched
  torch::Device device{torch::kCPU};
  bool launched = false;
  int64_t log_calls = 0;
  int uncaught_exceptions_at_construction = std::uncaught_exceptions();

  c10::intrusive_ptr<c10d::Store> store;
  c10d_compat::ProcessGroupPtr group;
  // What the strategy sees (its name resolved: "ddp", "single_device",
  // "zero1", "zero2"), and the strategy.
  StrategyContext context;
  std::unique_ptr<Strategy> strategy;
  // Every set-up model. A model held by value is not owned (`owner` is
  // null) and may be destroyed before the Fabric, so nothing after setup
  // dereferences `address`: backward, the sync check and the warnings use
  // the parameter tensors kept here (the same tensors the model holds).
  struct SetUpModel {
    const torch::nn::Module* address = nullptr;
    std::shared_ptr<torch::nn::Module> owner;
    NamedParameters parameters;
    int no_sync_depth = 0;  // how many no_backward_sync guards hold it
  };
  std::vector<SetUpModel> models;
  SetUpModel* find_model(const torch::nn::Module* address) {
    for (auto& model : models) {
      if (model.address == address) return &model;
    }
    return nullptr;
  }

  // Several processes: catches ranks that left training at different steps.
  std::unique_ptr<JobMonitor> monitor;
  // FABRIC_CHECK_SYNC=1.
  std::unique_ptr<SyncCheck> sync_check;
  // Optimizers seen to step a set-up model's parameters (never dereferenced).
  std::unordered_set<const torch::optim::Optimizer*> optimizers_known_set_up;
  bool warned_backward_without_setup = false;
  bool warned_step_without_setup = false;

  // "16-mixed": PyTorch's GradScaler, in plain tensor ops (1.13 has no CPU
  // kernels for _amp_foreach_non_finite_check_and_unscale_/_amp_update_scale_).
  struct LossScaler {
    bool active = false;
    double scale = 1.0;
    int64_t growth_tracker = 0;  // clean steps since the last change
    Options::GradScalerOptions options;
  } scaler;

  // Runs one collective. When it fails because another rank died, the
  // launcher knows the cause within moments and is already stopping this
  // process with a clear message; the collective's own error (a Gloo
  // "connection closed" trace) would only confuse, so it is swallowed then.
  // A timeout (a rank that is alive but does not join) is said in words.
  template <class Function>
  auto collective(const char* what, Function&& function) -> decltype(function()) {
    MonitorScope scope(monitor.get(), what);
    try {
      return function();
    } catch (const std::exception& error) {
      const std::string message = error.what();
      if (monitor) {
        // Gloo found data of another size: the ranks are in different
        // collectives. The monitor finds out where each one is, says so and
        // ends the job (this call does not return then).
        if (JobMonitor::is_mismatch_error(message)) monitor->collective_failed(message);
        // Another rank is ending the job for that reason (its exit closed
        // this collective's connections): its message, not this error.
        monitor->stop_if_job_is_stopping();
      }
      const bool timed_out = message.find("Timed out") != std::string::npos ||
                             message.find("timed out") != std::string::npos;
      // A rank that died makes the collective fail at once (connection
      // closed), and the launcher's message follows within moments; a
      // timeout has waited long enough already.
      const auto patience = timed_out ? std::chrono::milliseconds(0) : std::chrono::seconds(3);
      if (wait_for_known_failure(patience)) wait_for_exit_in_progress();
      const std::string error_line = message.substr(0, message.find('\n'));
      if (timed_out) {
        throw std::runtime_error(
            std::string("fabric: ") + what + " on rank " + std::to_string(placement.global_rank) +
            " timed out after " + std::to_string(options.timeout().count()) +
            " ms (Options::timeout): another rank did not join it in time; it is stuck, far "
            "slower, or on a different code path" +
            (placement.num_nodes > 1
                 ? ", or the network between the nodes failed (ranks on other nodes: " +
                       layout.describe_other_nodes(placement.node_rank) + ")"
                 : std::string()) +
            ". Collective error: " + error_line);
      }
      // A whole node gone (killed, out of memory, powered off): no launcher
      // here saw its ranks end, so say which node this rank lost.
      if (placement.num_nodes > 1) {
        const std::string lost = describe_lost_peer(layout, placement, message);
        if (!lost.empty()) {
          throw std::runtime_error(
              std::string("fabric: ") + what + " on rank " + std::to_string(placement.global_rank) +
              " (node " + std::to_string(placement.node_rank) + ") failed: " + lost +
              ". Its processes ended (killed, out of memory, a crash, the machine went down) or "
              "the network to it failed; the job cannot go on: restart it on every node (from "
              "the last checkpoint). Collective error: " + error_line);
        }
      }
      throw;
    }
  }
  template <class Function>
  auto collective(Function&& function) -> decltype(function()) {
    return collective("a collective", std::forward<Function>(function));
  }

  void require_launched(const char* what) const {
    if (!launched && placement.world_size > 1) {
      throw std::logic_error(std::string("fabric: call launch() before ") + what);
    }
  }

  // Marks the main thread as inside a collective (or a public call made of
  // several) for the JobMonitor; nested scopes keep the outer call's name.
  class MonitorScope {
   public:
    MonitorScope(JobMonitor* monitor, const char* what) : monitor_(monitor) {
      if (monitor_ != nullptr) outer_ = monitor_->enter(what);
    }
    ~MonitorScope() {
      if (monitor_ != nullptr) monitor_->leave(outer_);
    }
    MonitorScope(const MonitorScope&) = delete;
    MonitorScope& operator=(const MonitorScope&) = delete;

   private:
    JobMonitor* monitor_;
    JobMonitor::Scope outer_;
  };
};

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
} // namespace

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
} // namespace

void verify_checkpoint_checksums(const std::string& path) {
  const auto damaged = [&path](const std::string& why) {
    throw CheckpointError("fabric::load: '" + path +
                          "' is not a readable checkpoint (truncated or corrupted?): " + why +
                          ". Restore a good copy, or delete it to start without it");
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
  const int fd =
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
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
    throw std::runtime_error("fabric: cannot rename '" + temporary + "' to '" + path +
                             "': " + std::strerror(error));
  }
  // Makes the rename itself durable.
  const int directory = ::open(directory_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory >= 0) {
    ::fsync(directory);
    ::close(directory);
  }
}

} // namespace detail

namespace {

int environment_integer(const char* name, int fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::atoi(text) : fallback;
}

std::string environment_string(const char* name, const std::string& fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::string(text) : fallback;
}

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::Max:
      return c10d::ReduceOp::MAX;
    case ReduceOp::Min:
      return c10d::ReduceOp::MIN;
    case ReduceOp::Sum:
    case ReduceOp::Mean:
      break;
  }
  // Gloo has no AVG: Mean is a sum divided afterwards.
  return c10d::ReduceOp::SUM;
}

} // namespace

Fabric::Fabric(Options options) : state_(std::make_unique<detail::FabricState>()) {
  auto& state = *state_;
  options.override_from_environment();
  state.options = options;

  std::string accelerator = options.accelerator();
  const bool cuda_available = torch::cuda::is_available();
  if (accelerator == "auto") accelerator = cuda_available ? "cuda" : "cpu";
  if (accelerator == "cuda" && !cuda_available) {
    throw std::invalid_argument(
        "fabric: accelerator 'cuda' was requested, but CUDA is not available here (no GPU "
        "visible, or LibTorch built without CUDA). Use 'cpu' or 'auto'.");
  }
  const DeviceSelection& devices = options.devices();
  const int visible = accelerator == "cuda" ? static_cast<int>(torch::cuda::device_count()) : 1;
  if (accelerator == "cuda") {
    if (devices.kind == DeviceSelection::Kind::Count && devices.count > visible) {
      throw std::invalid_argument("fabric: devices=" + std::to_string(devices.count) +
                                  " but only " + std::to_string(visible) +
                                  " CUDA devices are visible");
    }
    for (int id : devices.ids) {
      if (id >= visible) {
        throw std::invalid_argument("fabric: CUDA device " + std::to_string(id) +
                                    " does not exist (" + std::to_string(visible) +
                                    " visible)");
      }
    }
  }
  // On CPU, devices=N means N processes (that is how CPU DDP runs); "auto" and
  // -1 mean one process, since one process already uses every core.
  const int local_processes = devices.process_count(visible);

  auto& placement = state.placement;
  if (auto from_environment = detail::placement_from_environment()) {
    placement = *from_environment;
  } else {
    placement.local_world_size = local_processes;
    placement.num_nodes = options.num_nodes();
    placement.world_size = local_processes * placement.num_nodes;
    placement.node_rank = environment_integer("NODE_RANK", environment_integer("GROUP_RANK", 0));
    placement.global_rank = placement.node_rank * local_processes;
    placement.master_addr = environment_string("MASTER_ADDR", "127.0.0.1");
    placement.master_port = environment_integer("MASTER_PORT", 0);
    if (placement.num_nodes > 1 &&
        (std::getenv("MASTER_ADDR") == nullptr || std::getenv("MASTER_PORT") == nullptr ||
         std::getenv("NODE_RANK") == nullptr)) {
      throw std::invalid_argument(
          "fabric: num_nodes=" + std::to_string(placement.num_nodes) +
          " needs MASTER_ADDR, MASTER_PORT and NODE_RANK in the environment of every node "
          "(or start the job with torchrun or SLURM)");
    }
    if (placement.node_rank < 0 || placement.node_rank >= placement.num_nodes) {
      throw std::invalid_argument("fabric: NODE_RANK=" + std::to_string(placement.node_rank) +
                                  " is outside 0.." + std::to_string(placement.num_nodes - 1));
    }
  }

  if (accelerator == "cuda") {
    const int local_rank = placement.local_rank;
    const int index = local_rank < static_cast<int>(devices.ids.size()) ? devices.ids[local_rank]
                                                                        : local_rank;
    state.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
  }

  if (options.precision() == "16-mixed") {
    state.scaler.active = true;
    state.scaler.options = options.grad_scaler();
    state.scaler.scale = state.scaler.options.init_scale;
  }

  std::string strategy = options.strategy();
  if (strategy == "auto") strategy = placement.world_size > 1 ? "ddp" : "single_device";
  if (strategy == "single_device" && placement.world_size > 1) {
    throw std::invalid_argument(
        "fabric: strategy 'single_device' runs one process, but the job has " +
        std::to_string(placement.world_size) + " (devices=" + devices.to_string() +
        ", num_nodes=" + std::to_string(placement.num_nodes) + "). Use 'ddp' or 'auto'.");
  }
  auto& context = state.context;
  context.options = state.options;
  context.strategy = strategy;
  context.rank = placement.global_rank;
  context.world_size = placement.world_size;
  context.device = state.device;
  state.strategy = detail::make_strategy(context);
  if (detail::SyncCheck::requested()) state.sync_check = std::make_unique<detail::SyncCheck>();
}

CheckpointError::CheckpointError(const std::string& message)
    : c10::Error(detail::c10d_compat::error_without_backtrace(message)) {}

Fabric::~Fabric() {
  auto& state = *state_;
  const bool unwinding = std::uncaught_exceptions() > state.uncaught_exceptions_at_construction;
  if (state.monitor) {
    // Every rank waits here until all have finished; a rank that another
    // one waits for in a collective ends the job instead (exit code 1).
    if (!unwinding) {
      state.monitor->finish();
    } else if (state.placement.launcher != "fabric" &&
               !(state.placement.launcher.empty() && state.placement.local_world_size > 1)) {
      // No launcher of Fabric's watches this job's exits: ranks waiting at
      // the end learn from the store that this one will not come.
      state.monitor->abandon("raised an exception");
    }
  }
  // Rank 0 first waits for the ranks it started (they may still use the
  // process group and the store it serves); a failed one ends the process.
  if (state.launched) detail::finish_launch(unwinding);
  try {
    if (is_global_zero()) {
      for (const auto& logger : state.options.loggers()) logger->finalize();
      if (state.sync_check && !unwinding) {
        const std::string summary = state.sync_check->summary(world_size());
        if (!summary.empty()) detail::write_stderr_line(summary);
      }
    }
    state.monitor.reset();
    state.strategy.reset();
    state.context.group.reset();
    state.group.reset();
    state.store.reset();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "fabric: error while shutting down: %s\n", error.what());
  }
}

void Fabric::launch() {
  auto& state = *state_;
  if (state.launched) throw std::logic_error("fabric: launch() was called twice");
  state.launched = true;
  auto& placement = state.placement;
  if (placement.world_size == 1) return;

#ifdef USE_C10D_NCCL
  if (state.device.is_cuda()) c10::cuda::set_device(state.device.index());
#endif
  if (placement.launcher == "fabric") detail::watch_launcher_channel(placement.global_rank);

  // N processes that each start one intra-op thread per core would run
  // N x cores threads and mostly wait on each other; split the cores instead
  // (torchrun sets OMP_NUM_THREADS=1 for the same reason; it wins if set).
  if (environment_string("OMP_NUM_THREADS", "").empty()) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    torch::set_num_threads(std::max(1, cores / placement.local_world_size));
  }

  const bool starts_local_ranks = placement.launcher.empty() && placement.local_world_size > 1;
  auto connect_store = [&] {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<std::uint16_t>(placement.master_port);
    store_options.isServer = placement.global_rank == 0;
    store_options.numWorkers = static_cast<size_t>(placement.world_size);
    // The process group's rendezvous waits for everybody anyway, and rank 0
    // must not block here before it has started the other ranks.
    store_options.waitWorkers = false;
    store_options.timeout = state.options.timeout();
    // Rank 0 serves the store on the address the ranks connect to only
    // (loopback for a single-node job), not on every interface.
    detail::BindScope bind_scope(store_options.isServer ? detail::store_bind_address(placement) : "");
    const std::string where = placement.master_addr + ":" + std::to_string(placement.master_port);
    c10::intrusive_ptr<c10d::TCPStore> store;
    try {
      store = c10::make_intrusive<c10d::TCPStore>(placement.master_addr, store_options);
    } catch (const std::exception& error) {
      const std::string cause = detail::first_line(error.what());
      if (store_options.isServer) {
        throw std::runtime_error(
            "fabric: rank 0 cannot serve the rendezvous store on " + where +
            " (MASTER_ADDR:MASTER_PORT): " + cause +
            (placement.master_port != 0
                 ? " Another program may hold the port: choose a free MASTER_PORT, or leave it "
                   "unset (single node) and Fabric picks one."
                 : ""));
      }
      throw std::runtime_error("fabric: rank " + std::to_string(placement.global_rank) +
                               " cannot reach the rendezvous store of rank 0 at " + where +
                               " (MASTER_ADDR:MASTER_PORT) within " +
                               std::to_string(state.options.timeout().count()) +
                               " ms (Options::timeout): " + cause);
    }
    // Port 0 asks the kernel for a free port; the server knows which it got,
    // with no window in which another program could take it.
    placement.master_port = store->getPort();
    state.store = store;
  };
  if (placement.global_rank == 0) {
    connect_store();
    if (starts_local_ranks) detail::start_local_ranks(placement);
  } else {
    // Another node's local rank 0: start this node's ranks first, so that
    // they connect while this one does.
    if (starts_local_ranks) detail::start_local_ranks(placement);
    state.collective([&] { connect_store(); });
  }

  state.collective([&] {
    const detail::GlooAddress address = detail::gloo_address(placement);
    state.layout = detail::check_job(*state.store, placement, state.options.timeout(), address.address);
    if (state.device.is_cuda()) {
#ifdef USE_C10D_NCCL
      // NCCL's bootstrap picks its own interface; across nodes, the one
      // that reaches node 0 unless the user named one.
      if (placement.num_nodes > 1 && std::getenv("NCCL_SOCKET_IFNAME") == nullptr) {
        const std::string interface = detail::interface_with_address(address.address);
        if (!interface.empty()) ::setenv("NCCL_SOCKET_IFNAME", interface.c_str(), 0);
      }
      state.group = detail::c10d_compat::make_nccl_group(state.store, placement.global_rank,
                                                         placement.world_size,
                                                         state.options.timeout());
      return;
#endif
    }
    detail::c10d_compat::GlooDevice gloo_device;
    try {
      gloo_device = address.interface.empty()
                        ? c10d::ProcessGroupGloo::createDeviceForHostname(address.address)
                        : c10d::ProcessGroupGloo::createDeviceForInterface(address.interface);
    } catch (const std::exception& error) {
      throw std::runtime_error("fabric: rank " + std::to_string(placement.global_rank) +
                               " cannot open Gloo's network device on " +
                               (address.interface.empty() ? address.address : address.interface) +
                               " (" + address.why + "): " + detail::first_line(error.what()));
    }
    state.group = detail::c10d_compat::make_gloo_group(state.store, placement.global_rank,
                                                       placement.world_size,
                                                       state.options.timeout(), gloo_device);
  });
  state.context.group = state.group;

  // The JobMonitor's watchdog gets a store connection of its own.
  detail::JobMonitor::Config monitor_config;
  monitor_config.rank = placement.global_rank;
  monitor_config.world_size = placement.world_size;
  monitor_config.supervised = placement.launcher == "fabric" || starts_local_ranks;
  c10::intrusive_ptr<c10d::Store> watchdog_store = state.collective([&] {
    c10d::TCPStoreOptions client_options;
    client_options.port = static_cast<std::uint16_t>(placement.master_port);
    client_options.isServer = false;
    client_options.numWorkers = static_cast<size_t>(placement.world_size);
    client_options.waitWorkers = false;
    client_options.timeout = state.options.timeout();
    return c10::intrusive_ptr<c10d::Store>(
        c10::make_intrusive<c10d::TCPStore>(placement.master_addr, client_options));
  });
  state.monitor =
      std::make_unique<detail::JobMonitor>(monitor_config, state.store, std::move(watchdog_store));
  detail::report_joined();
}

torch::Device Fabric::device() const { return state_->device; }
int Fabric::global_rank() const { return state_->placement.global_rank; }
int Fabric::local_rank() const { return state_->placement.local_rank; }
int Fabric::node_rank() const { return state_->placement.node_rank; }
int Fabric::world_size() const { return state_->placement.world_size; }
bool Fabric::is_global_zero() const { return state_->placement.global_rank == 0; }
const Options& Fabric::options() const { return state_->options; }

namespace {

// Both setup_module overloads; `owner` is null for a model held by value.
void setup_model(detail::FabricState& state, torch::nn::Module& model,
                 std::shared_ptr<torch::nn::Module> owner) {
  torch::nn::Module* const module = &model;
  state.require_launched("setup()");
  detail::NamedParameters all_parameters;
  for (const auto& item : module->named_parameters()) {
    all_parameters.emplace_back(item.key(), item.value());
  }
  // A model set up again is recognized by its parameter tensors, not only
  // its address: a model held by value that was destroyed can have a
  // successor at the same address (a train() function called twice), which
  // is a new model and needs its own Reducer.
  bool first_setup = true;
  if (auto* known = state.find_model(module)) {
    bool same = known->parameters.size() == all_parameters.size();
    for (size_t i = 0; same && i < all_parameters.size(); ++i) {
      same = known->parameters[i].second.unsafeGetTensorImpl() ==
             all_parameters[i].second.unsafeGetTensorImpl();
    }
    if (same) {
      first_setup = false;
    } else {
      state.strategy->forget_module(module);
      state.models.erase(state.models.begin() + (known - state.models.data()));
    }
  }
  // "*-true" precisions: the whole module in that dtype, as Lightning does.
  const std::string& precision = state.options.precision();
  if (precision == "64-true") {
    module->to(state.device, torch::kDouble);
  } else if (precision == "16-true") {
    module->to(state.device, torch::kHalf);
  } else if (precision == "bf16-true") {
    module->to(state.device, torch::kBFloat16);
  } else {
    module->to(state.device);
  }
  if (first_setup) {
    detail::FabricState::SetUpModel entry;
    entry.address = module;
    entry.owner = std::move(owner);
    entry.parameters = all_parameters;  // Module::to keeps the tensors (set_data)
    state.models.push_back(std::move(entry));
  }

  detail::NamedParameters trained;
  for (const auto& item : all_parameters) {
    if (item.second.requires_grad()) trained.push_back(item);
  }
  if (state.group) {
    // Every rank starts from rank 0's weights and buffers, whatever its seed.
    // Detached aliases: broadcast writes into them in place, which autograd
    // would refuse on leaf parameters that require grad.
    std::vector<at::Tensor> module_state;
    std::vector<at::Tensor> trained_parameters;
    for (const auto& item : all_parameters) module_state.push_back(item.second.detach());
    for (const auto& item : trained) trained_parameters.push_back(item.second);
    for (const auto& buffer : module->buffers()) module_state.push_back(buffer.detach());

    state.collective("fabric.setup()", [&] {
      // Fails with a clear message when ranks built different models.
      c10d::verify_params_across_processes(state.group, trained_parameters, c10::nullopt);
      if (!module_state.empty()) {
        c10d::broadcast_coalesced(state.group, module_state, detail::kBroadcastBucketBytes, 0);
      }
    });
  }
  // A model set up twice keeps what the strategy attached the first time
  // (a second Reducer on the same parameters would wait for gradients that
  // the first one takes).
  if (!first_setup) {
    state.strategy->module_loaded(*module);
    return;
  }
  state.collective("fabric.setup()", [&] { state.strategy->setup_module(*module, trained); });
}

} // namespace

void Fabric::setup_module(const std::shared_ptr<torch::nn::Module>& module) {
  TORCH_CHECK(module != nullptr, "fabric::setup: the model is empty");
  setup_model(*state_, *module, module);
}

void Fabric::setup_module(torch::nn::Module& module) { setup_model(*state_, module, nullptr); }

void Fabric::setup_optimizer(torch::optim::Optimizer& optimizer) {
  // Module::to() moves parameters in place (set_data), so the optimizer's
  // references stay valid; only a check is left to do.
  state_->require_launched("setup()");
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& parameter : group.params()) {
      TORCH_CHECK(parameter.device() == state_->device,
                  "fabric::setup: an optimizer parameter is on ", parameter.device(),
                  " instead of ", state_->device,
                  "; set up the model that owns it with the optimizer");
    }
  }
  state_->strategy->setup_optimizer(optimizer);
}

void Fabric::backward(const torch::Tensor& loss, const torch::Tensor& gradient,
                      c10::optional<bool> retain_graph, bool create_graph) {
  auto& state = *state_;
  state.strategy->check_in_sync("fabric.backward()");
  // With several set-up models (a GAN's generator and discriminator), each
  // loss reaches only some of them, and the strategy acts only on those it
  // reaches (a DDP Reducer armed for a backward that never reaches its
  // parameters would wait for their gradients forever).
  std::unordered_set<const torch::autograd::Node*> reached;
  const bool scaling = state.scaler.active;
  if ((state.strategy->needs_reached_models() || scaling) && loss.grad_fn()) {
    std::vector<const torch::autograd::Node*> pending{loss.grad_fn().get()};
    reached.insert(pending.back());
    while (!pending.empty()) {
      const torch::autograd::Node* node = pending.back();
      pending.pop_back();
      for (const auto& edge : node->next_edges()) {
        const torch::autograd::Node* next = edge.function.get();
        if (next != nullptr && reached.insert(next).second) pending.push_back(next);
      }
    }
  }
  auto reaches_any = [&reached](const detail::NamedParameters& parameters) {
    for (const auto& parameter : parameters) {
      const auto accumulator = torch::autograd::impl::try_get_grad_accumulator(parameter.second);
      if (accumulator && reached.count(accumulator.get()) > 0) return true;
    }
    return false;
  };
  // Set-up models this backward reaches, in setup order; under
  // no_backward_sync their gradients stay local (not synchronized), and the
  // next synchronized backward reduces the accumulated sum.
  std::vector<detail::ReachedModel> models;
  std::vector<std::vector<at::Tensor>> synchronized_parameters;
  if (!reached.empty()) {
    for (const auto& model : state.models) {
      if (!reaches_any(model.parameters)) continue;
      const bool synchronized = model.no_sync_depth == 0;
      models.push_back({model.address, synchronized});
      if (!synchronized) continue;
      std::vector<at::Tensor> parameters;
      for (const auto& item : model.parameters) parameters.push_back(item.second);
      synchronized_parameters.push_back(std::move(parameters));
    }
  }
  // Several ranks, and a loss that reaches no set-up model: nothing is
  // synchronized, and the ranks silently train different models.
  if (state.placement.world_size > 1 && !state.warned_backward_without_setup && loss.grad_fn() &&
      (state.models.empty() || (!reached.empty() && models.empty()))) {
    state.warned_backward_without_setup = true;
    if (is_global_zero()) {
      detail::write_stderr_line(
          "fabric: warning: fabric.backward() runs on " + std::to_string(world_size()) +
          " processes, but " +
          (state.models.empty() ? "no model was passed to fabric.setup()"
                                : "the loss reaches no model passed to fabric.setup()") +
          ", so the gradients are not all-reduced: every rank trains its own copy of the model "
          "on its own data. Call fabric.setup(model, optimizer) once the optimizer exists, "
          "before training. (Printed once, by rank 0.)");
    }
  }

  state.collective("fabric.backward()", [&] {
    state.strategy->before_backward(models, loss);
    if (scaling) {
      (loss * state.scaler.scale).backward(gradient, retain_graph, create_graph);
    } else {
      loss.backward(gradient, retain_graph, create_graph);
    }
    state.strategy->after_backward(models);
  });
  if (state.monitor) state.monitor->count_backward();
  if (!scaling) return;

  // Gradients are reduced now (the Reducer finishes inside backward), so
  // with ddp every rank finds the same inf/NaN; under zero2 each rank holds
  // its own parameters' gradients and the ranks agree on the finding.
  // Micro-batches under no_backward_sync stay scaled until the backward that
  // reduces them.
  if (synchronized_parameters.empty()) return;
  torch::NoGradGuard no_grad;
  const double inverse_scale = 1.0 / state.scaler.scale;
  std::vector<at::Tensor> finite_flags;
  for (const auto& parameters : synchronized_parameters) {
    for (const auto& parameter : parameters) {
      at::Tensor grad = parameter.grad();
      if (!grad.defined()) continue;
      grad.mul_(inverse_scale);
      finite_flags.push_back(torch::isfinite(grad).all());
    }
  }
  const bool local_inf =
      !finite_flags.empty() && !torch::stack(finite_flags).all().item<bool>();
  const bool found_inf = state.collective("fabric.backward() (loss scaler)",
                                          [&] { return state.strategy->agree_any(local_inf); });
  auto& scaler = state.scaler;
  if (found_inf) {
    // C++ optimizers skip parameters without a gradient entirely (no
    // update, no moment or step change): that is the skipped step.
    for (const auto& parameters : synchronized_parameters) {
      for (const auto& parameter : parameters) parameter.mutable_grad() = at::Tensor();
    }
    scaler.scale *= scaler.options.backoff_factor;
    scaler.growth_tracker = 0;
  } else if (++scaler.growth_tracker >= scaler.options.growth_interval) {
    scaler.scale *= scaler.options.growth_factor;
    scaler.growth_tracker = 0;
  }
}

namespace {

// Several ranks, and an optimizer none of whose parameters belongs to a
// set-up model: its gradients were never all-reduced. Checked once per
// optimizer until the first warning.
void warn_if_optimizer_not_set_up(detail::FabricState& state,
                                  const torch::optim::Optimizer& optimizer) {
  if (state.placement.world_size == 1 || state.warned_step_without_setup ||
      state.optimizers_known_set_up.count(&optimizer) > 0) {
    return;
  }
  std::unordered_set<const void*> set_up;
  for (const auto& model : state.models) {
    for (const auto& item : model.parameters) set_up.insert(item.second.unsafeGetTensorImpl());
  }
  bool any_parameter = false;
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& parameter : group.params()) {
      any_parameter = true;
      if (set_up.count(parameter.unsafeGetTensorImpl()) > 0) {
        state.optimizers_known_set_up.insert(&optimizer);
        return;
      }
    }
  }
  if (!any_parameter) return;
  state.warned_step_without_setup = true;
  if (state.placement.global_rank != 0) return;
  detail::write_stderr_line(
      "fabric: warning: fabric.step() runs on " + std::to_string(state.placement.world_size) +
      " processes, but none of the optimizer's parameters belongs to a model passed to "
      "fabric.setup(), so its gradients are not synchronized: every rank trains its own copy "
      "of the model on its own data. Call fabric.setup(model, optimizer) once the optimizer "
      "exists, before training. (Printed once, by rank 0.)");
}

} // namespace

void Fabric::step(torch::optim::Optimizer& optimizer) {
  auto& state = *state_;
  state.require_launched("step()");
  warn_if_optimizer_not_set_up(state, optimizer);
  state.collective("fabric.step()", [&] { state.strategy->step(optimizer, nullptr); });
  if (state.monitor) state.monitor->count_step();
  if (state.sync_check) check_sync_after_step(optimizer);
}

torch::Tensor Fabric::step(torch::optim::Optimizer& optimizer,
                           torch::optim::Optimizer::LossClosure closure) {
  auto& state = *state_;
  state.require_launched("step()");
  warn_if_optimizer_not_set_up(state, optimizer);
  auto loss =
      state.collective("fabric.step()", [&] { return state.strategy->step(optimizer, closure); });
  if (state.monitor) state.monitor->count_step();
  if (state.sync_check) check_sync_after_step(optimizer);
  return loss;
}

void Fabric::check_sync_after_step(torch::optim::Optimizer& optimizer) {
  auto& state = *state_;
  // The set-up models' parameters (kept at setup: a model held by value may
  // be gone), then the optimizer's others, each tensor once.
  std::vector<detail::SyncCheck::Parameter> parameters;
  std::unordered_set<const void*> listed;
  for (size_t k = 0; k < state.models.size(); ++k) {
    for (const auto& [name, tensor] : state.models[k].parameters) {
      if (!listed.insert(tensor.unsafeGetTensorImpl()).second) continue;
      parameters.push_back({state.models.size() > 1
                                ? name + " (set-up model #" + std::to_string(k + 1) + ")"
                                : name,
                            tensor});
    }
  }
  const auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& group_parameters = groups[g].params();
    for (size_t i = 0; i < group_parameters.size(); ++i) {
      if (!listed.insert(group_parameters[i].unsafeGetTensorImpl()).second) continue;
      parameters.push_back({"parameter " + std::to_string(i) + " of the optimizer's param group " +
                                std::to_string(g) + " (no set-up model holds it)",
                            group_parameters[i]});
    }
  }
  detail::FabricState::MonitorScope scope(state.monitor.get(), "fabric.step() (FABRIC_CHECK_SYNC)");
  detail::SyncCheck::AllGather gather;
  if (state.group) gather = [this](const at::Tensor& tensor) { return all_gather(tensor); };
  const std::string failure = state.sync_check->after_step(parameters, world_size(), gather);
  if (failure.empty()) return;
  // Every rank found the same: rank 0 says it once and every rank exits 1.
  detail::stop_reporting_child_exits();
  if (is_global_zero()) detail::write_stderr_line(failure);
  if (!is_global_zero() && state.placement.launcher == "fabric") {
    // Stopped by the launcher once rank 0 has spoken; exits itself otherwise.
    std::this_thread::sleep_for(std::chrono::seconds(10));
  }
  detail::abort_job("the sync check failed (see rank 0's message)", 1);
}

double Fabric::loss_scale() const { return state_->scaler.active ? state_->scaler.scale : 1.0; }

Autocast Fabric::autocast() {
  const c10::DeviceType device_type = state_->device.type();
  const std::string& precision = state_->options.precision();
  if (precision == "bf16-mixed") return Autocast(true, device_type, at::kBFloat16);
  if (precision == "16-mixed" && device_type == c10::DeviceType::CUDA) {
    return Autocast(true, device_type, at::kHalf);
  }
  return Autocast(false, device_type, at::kFloat);
}

Autocast::Autocast(bool enabled, c10::DeviceType device_type, at::ScalarType dtype)
    : enabled_(enabled), device_type_(device_type) {
  if (!enabled_) return;
  namespace amp = detail::autocast_compat;
  previous_enabled_ = amp::is_enabled(device_type_);
  previous_dtype_ = amp::dtype(device_type_);
  amp::set_enabled(device_type_, true);
  amp::set_dtype(device_type_, dtype);
  at::autocast::increment_nesting();
}

Autocast::~Autocast() {
  if (!enabled_) return;
  namespace amp = detail::autocast_compat;
  // The cast weights are cached while any autocast scope is open.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  amp::set_enabled(device_type_, previous_enabled_);
  amp::set_dtype(device_type_, previous_dtype_);
}

std::ostream& Fabric::print() {
  static std::ostream discard(nullptr);  // no buffer: every write is dropped
  return is_global_zero() ? std::cout : discard;
}

int Fabric::printf(const char* format, ...) {
  if (!is_global_zero()) return 0;
  va_list arguments;
  va_start(arguments, format);
  const int result = std::vprintf(format, arguments);
  va_end(arguments);
  std::fflush(stdout);
  return result;
}

void Fabric::write_to_stdout(const std::string& text) { std::cout << text; }

torch::Tensor Fabric::all_reduce(const torch::Tensor& tensor, ReduceOp op) {
  auto& state = *state_;
  state.require_launched("all_reduce()");
  torch::Tensor result = tensor.detach().to(state.device).clone(at::MemoryFormat::Contiguous);
  if (state.group) {
    std::vector<at::Tensor> tensors{result};
    c10d::AllreduceOptions reduce_options;
    reduce_options.reduceOp = to_c10d(op);
    state.collective("fabric.all_reduce()",
                     [&] { state.group->allreduce(tensors, reduce_options)->wait(); });
  }
  if (op == ReduceOp::Mean) result = result / world_size();
  return result;
}

double Fabric::all_reduce_double(double value, ReduceOp op) {
  return all_reduce(torch::tensor(value, torch::kDouble), op).cpu().item<double>();
}

int64_t Fabric::all_reduce_integer(int64_t value, ReduceOp op) {
  return all_reduce(torch::tensor(value, torch::kLong), op).cpu().item<int64_t>();
}

void Fabric::check_integer_reduction(ReduceOp op, const char* what) {
  if (op != ReduceOp::Mean) return;
  throw std::invalid_argument(
      std::string("fabric::all_reduce: ReduceOp::Mean of ") + what +
      " would not be one: pass a double (or float) to average, or reduce with "
      "ReduceOp::Sum and divide by the total count yourself");
}

void Fabric::throw_integer_overflow(const char* why) {
  throw std::overflow_error(std::string("fabric::all_reduce: integers are reduced as int64_t; ") +
                            why + ". Reduce a double instead");
}

std::vector<torch::Tensor> Fabric::all_gather(const torch::Tensor& tensor) {
  auto& state = *state_;
  state.require_launched("all_gather()");
  torch::Tensor local = tensor.detach().to(state.device).contiguous();
  if (!state.group) return {local.clone()};

  // Ranks may differ in the first dimension (the last batch of an epoch):
  // exchange shapes, pad to the largest, gather, cut the padding off again.
  const int64_t dims = local.dim();
  TORCH_CHECK(dims <= detail::kMaxGatherDims, "fabric::all_gather: at most ",
              detail::kMaxGatherDims, " dimensions");
  auto header = torch::full({detail::kMaxGatherDims + 2}, -1,
                            torch::TensorOptions().dtype(torch::kLong).device(state.device));
  {
    auto header_cpu = torch::full({detail::kMaxGatherDims + 2}, -1, torch::kLong);
    auto values = header_cpu.accessor<int64_t, 1>();
    values[0] = dims;
    values[1] = static_cast<int64_t>(local.scalar_type());
    for (int64_t d = 0; d < dims; ++d) values[2 + d] = local.size(d);
    header.copy_(header_cpu);
  }
  std::vector<std::vector<at::Tensor>> gathered_headers(1);
  for (int r = 0; r < world_size(); ++r) gathered_headers[0].push_back(torch::empty_like(header));
  std::vector<at::Tensor> header_input{header};
  state.collective("fabric.all_gather()",
                   [&] { state.group->allgather(gathered_headers, header_input)->wait(); });

  int64_t largest_first_dim = dims > 0 ? local.size(0) : 0;
  std::vector<int64_t> first_dims;
  for (int r = 0; r < world_size(); ++r) {
    auto other = gathered_headers[0][r].cpu();
    auto values = other.accessor<int64_t, 1>();
    bool same = values[0] == dims && values[1] == static_cast<int64_t>(local.scalar_type());
    for (int64_t d = 1; same && d < dims; ++d) same = values[2 + d] == local.size(d);
    if (!same) {
      throw std::runtime_error("fabric::all_gather: rank " + std::to_string(r) +
                               " passed a tensor whose dtype or shape (beyond the first "
                               "dimension) differs from rank " +
                               std::to_string(global_rank()) + "'s " +
                               c10::str(local.sizes(), " ", local.scalar_type()));
    }
    first_dims.push_back(dims > 0 ? values[2] : 0);
    largest_first_dim = std::max(largest_first_dim, first_dims.back());
  }

  torch::Tensor padded = local;
  if (dims > 0 && local.size(0) < largest_first_dim) {
    auto padding_shape = local.sizes().vec();
    padding_shape[0] = largest_first_dim - local.size(0);
    padded = torch::cat({local, torch::zeros(padding_shape, local.options())});
  }
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < world_size(); ++r) outputs[0].push_back(torch::empty_like(padded));
  std::vector<at::Tensor> input{padded};
  state.collective("fabric.all_gather()", [&] { state.group->allgather(outputs, input)->wait(); });

  std::vector<torch::Tensor> result;
  for (int r = 0; r < world_size(); ++r) {
    result.push_back(dims > 0 ? outputs[0][r].narrow(0, 0, first_dims[r]) : outputs[0][r]);
  }
  return result;
}

torch::Tensor Fabric::broadcast(const torch::Tensor& tensor, int src) {
  auto& state = *state_;
  state.require_launched("broadcast()");
  TORCH_CHECK(src >= 0 && src < world_size(), "fabric::broadcast: src ", src,
              " is not a rank (world size ", world_size(), ")");
  torch::Tensor result = tensor.detach().to(state.device).clone(at::MemoryFormat::Contiguous);
  if (state.group) {
    std::vector<at::Tensor> tensors{result};
    c10d::BroadcastOptions broadcast_options;
    broadcast_options.rootRank = src;
    state.collective("fabric.broadcast()",
                     [&] { state.group->broadcast(tensors, broadcast_options)->wait(); });
  }
  return result;
}

std::string Fabric::broadcast(const std::string& value, int src) {
  state_->require_launched("broadcast()");
  if (!state_->group) return value;
  detail::FabricState::MonitorScope scope(state_->monitor.get(), "fabric.broadcast()");
  const auto length = broadcast(torch::tensor({static_cast<int64_t>(value.size())}), src)
                          .cpu()
                          .item<int64_t>();
  if (length == 0) return {};
  auto bytes = torch::zeros({length}, torch::kUInt8);
  if (global_rank() == src) std::memcpy(bytes.data_ptr<uint8_t>(), value.data(), value.size());
  auto received = broadcast(bytes, src).cpu();
  return std::string(reinterpret_cast<const char*>(received.data_ptr<uint8_t>()),
                     static_cast<size_t>(length));
}

void Fabric::barrier(const std::string& name) {
  auto& state = *state_;
  state.require_launched("barrier()");
  if (!state.group) return;
  // The name goes into the monitor's messages: ranks in a barrier while
  // others are in another collective are told apart by it.
  detail::FabricState::MonitorScope scope(
      state.monitor.get(), state.monitor ? state.monitor->label_for_barrier(name) : "fabric.barrier()");
  // An all-gather of the names is the barrier: it completes only when every
  // rank contributed, and tells whether they all meant the same one.
  auto encoded = torch::zeros({detail::kBarrierNameBytes}, torch::kUInt8);
  std::memcpy(encoded.data_ptr<uint8_t>(), name.data(),
              std::min<size_t>(name.size(), detail::kBarrierNameBytes));
  const auto names = all_gather(encoded);
  auto decode = [](const torch::Tensor& bytes) {
    auto cpu = bytes.cpu();
    const char* data = reinterpret_cast<const char*>(cpu.data_ptr<uint8_t>());
    return std::string(data, strnlen(data, detail::kBarrierNameBytes));
  };
  const std::string mine = decode(encoded);
  bool same = true;
  for (const auto& other : names) same = same && decode(other) == mine;
  if (same) return;
  std::string message = "fabric: ranks reached different barriers (different code paths?):";
  for (size_t r = 0; r < names.size(); ++r) {
    message += " rank " + std::to_string(r) + " at '" + decode(names[r]) + "'";
    if (r + 1 < names.size()) message += ",";
  }
  throw std::runtime_error(message);
}

// ---- checkpoints of the whole state ----------------------------------------

namespace {

// Archive keys. Entry names are the user's and may hold any character, but
// archive keys become module attribute names (no dots), so entries are
// stored under their index and the names kept in a list.
constexpr const char* kFormatKey = "fabric_state_format";
constexpr int64_t kFormatVersion = 1;
constexpr const char* kNamesKey = "fabric_state_names";
constexpr const char* kKindsKey = "fabric_state_kinds";
std::string entry_key(size_t index) { return "entry" + std::to_string(index); }
constexpr const char* kScaleKey = "fabric_loss_scale";
constexpr const char* kGrowthTrackerKey = "fabric_loss_scale_growth_tracker";

std::vector<std::string> read_string_list(torch::serialize::InputArchive& archive,
                                          const char* key, const std::string& path) {
  c10::IValue value;
  if (!archive.try_read(key, value) || !value.isList()) {
    throw CheckpointError("fabric::load: '" + path + "' is not a fabric::State checkpoint (no '" +
                          key +
                          "'); was it written by fabric.save(path, object)? Load it with "
                          "fabric.load(path, object) then");
  }
  std::vector<std::string> strings;
  for (const auto& item : value.toListRef()) strings.push_back(item.toStringRef());
  return strings;
}

} // namespace

const char* StateEntry::kind() const noexcept {
  static const char* const kNames[] = {"module", "optimizer", "tensor", "int64", "int32",
                                       "double", "float",     "bool",   "string"};
  return kNames[target_.index()];
}

State::State(std::initializer_list<StateEntry> entries) {
  for (const auto& entry : entries) add(entry);
}

State& State::add(StateEntry entry) {
  for (const auto& existing : entries_) {
    if (existing.name() == entry.name()) {
      throw std::invalid_argument("fabric::State: the name '" + entry.name() +
                                  "' appears twice");
    }
  }
  entries_.push_back(std::move(entry));
  return *this;
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

void Fabric::load_other_file(const std::string& path,
                             const std::function<void(const std::string&)>& read) {
  detail::FabricState::MonitorScope scope(state_->monitor.get(), "fabric.load()");
  const auto load = [&] {
    torch::serialize::InputArchive archive;
    detail::open_checkpoint(path, archive, device());
    try {
      read(path);
    } catch (const std::exception& error) {
      throw CheckpointError("fabric::load: '" + path + "': " +
                            detail::first_line_of(detail::message_of(error)) +
                            " (does the file hold what is loaded into?)");
    }
  };
  detail::agree_on_load(*this, detail::load_error_of(path, load));
}

void Fabric::save_optimizer_file(const std::string& path, torch::optim::Optimizer& optimizer) {
  state_->strategy->check_in_sync("fabric.save()");
  auto undo = state_->collective(
      "fabric.save()", [&] { return state_->strategy->gather_optimizer_state(optimizer); });
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

void Fabric::save(const std::string& path, const State& state) {
  const auto& scaler = state_->scaler;
  // Sharded strategies: rank 0's optimizers hold the whole state while it
  // writes (the same file a ddp run writes), and only their own afterwards.
  state_->strategy->check_in_sync("fabric.save()");
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
      undo.push_back(state_->collective("fabric.save()", [&] {
        return state_->strategy->gather_optimizer_state(**optimizer);
      }));
    }
  }
  save_with(path, [&state, &scaler](std::ostream& stream) {
    torch::serialize::OutputArchive archive;
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
            if constexpr (std::is_same<Target, std::shared_ptr<torch::nn::Module>>::value) {
              torch::serialize::OutputArchive nested;
              target->save(nested);
              archive.write(key, nested);
            } else if constexpr (std::is_same<Target, torch::optim::Optimizer*>::value) {
              torch::serialize::OutputArchive nested;
              target->save(nested);
              archive.write(key, nested);
            } else if constexpr (std::is_same<Target, torch::Tensor*>::value) {
              archive.write(key, *target, /*is_buffer=*/true);
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
    if (scaler.active) {
      archive.write(kScaleKey, c10::IValue(scaler.scale));
      archive.write(kGrowthTrackerKey, c10::IValue(scaler.growth_tracker));
    }
    archive.write(kFormatKey, c10::IValue(kFormatVersion));
    archive.write(kNamesKey, c10::IValue(names));
    archive.write(kKindsKey, c10::IValue(kinds));
    archive.save_to(stream);
  });
}

void Fabric::load(const std::string& path, const State& state, bool strict) {
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
      fail("not a fabric::State checkpoint; was it written by fabric.save(path, object)? "
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
        fail("'" + entry.name() + "' holds a " + kinds[index] + " in the checkpoint, but a " +
             entry.kind() + " was passed to load it into");
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
        fail("cannot load '" + entry.name() + "': " +
             detail::first_line_of(detail::message_of(error)));
      }
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
        fail("cannot load '" + entry.name() + "': " +
             detail::first_line_of(detail::message_of(error)));
      }
    }
  };
  detail::agree_on_load(*this, detail::load_error_of(path, check));
  detail::agree_on_load(*this, detail::load_error_of(path, apply));
}

// ---- loggers -------------------------------------------------------------------

void Fabric::log(const std::string& name, double value, int64_t step) {
  log_dict(Metrics{{name, value}}, step);
}

void Fabric::log_dict(const Metrics& metrics, int64_t step) {
  const int64_t call = state_->log_calls++;
  if (!is_global_zero()) return;
  for (const auto& logger : state_->options.loggers()) {
    logger->log_metrics(metrics, step < 0 ? call : step);
  }
}

const std::vector<std::shared_ptr<Logger>>& Fabric::loggers() const {
  return state_->options.loggers();
}

// ---- training utilities ------------------------------------------------------

detail::FabricState* Fabric::checked_state_for_no_sync(const torch::nn::Module* module) {
  if (state_->find_model(module) == nullptr) {
    throw std::logic_error(
        "fabric::no_backward_sync: the model was not set up; call fabric.setup(model, ...) "
        "first");
  }
  return state_.get();
}

NoBackwardSync::NoBackwardSync(detail::FabricState* state, const torch::nn::Module* module,
                               bool enabled)
    : state_(state), module_(module), enabled_(enabled) {
  if (enabled_) ++state_->find_model(module_)->no_sync_depth;
}

NoBackwardSync::~NoBackwardSync() {
  // The model's entry is gone only if another model was set up at its
  // address while the guard lived.
  if (!enabled_) return;
  if (auto* model = state_->find_model(module_)) --model->no_sync_depth;
}

torch::Tensor Fabric::clip_module_gradients(torch::nn::Module& module,
                                            torch::optim::Optimizer& /*optimizer*/,
                                            c10::optional<double> clip_val,
                                            c10::optional<double> max_norm, double norm_type,
                                            bool error_if_nonfinite) {
  if (clip_val.has_value() == max_norm.has_value()) {
    throw std::invalid_argument(
        "fabric::clip_gradients: pass exactly one of clip_val and max_norm");
  }
  std::vector<torch::Tensor> gradients;
  for (const auto& parameter : module.parameters()) {
    if (parameter.grad().defined()) gradients.push_back(parameter.grad());
  }
  // Under zero2 each rank holds only its own parameters' gradients: the
  // total norm combines the ranks' partial ones (every rank takes part, also
  // one that owns no gradient).
  const bool sharded = state_->strategy->shards_gradients();
  if (gradients.empty() && !sharded) {
    return torch::zeros({}, torch::TensorOptions().device(state_->device));
  }
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> norms;
  for (const auto& gradient : gradients) {
    norms.push_back(gradient.detach().norm(norm_type).to(torch::kFloat));
  }
  torch::Tensor total;
  if (!sharded) {
    total = std::isinf(norm_type) ? torch::stack(norms).max() : torch::stack(norms).norm(norm_type);
  } else if (std::isinf(norm_type)) {
    const auto local = norms.empty() ? torch::zeros({}, torch::TensorOptions().device(state_->device))
                                     : torch::stack(norms).max();
    total = all_reduce(local, ReduceOp::Max);
  } else {
    const auto local = norms.empty() ? torch::zeros({}, torch::TensorOptions().device(state_->device))
                                     : torch::stack(norms).pow(norm_type).sum();
    total = all_reduce(local, ReduceOp::Sum).pow(1.0 / norm_type);
  }
  if (error_if_nonfinite && !std::isfinite(total.item<double>())) {
    throw std::runtime_error("fabric::clip_gradients: the total norm of the gradients is " +
                             std::to_string(total.item<double>()) +
                             "; pass error_if_nonfinite = false to clip anyway");
  }
  if (max_norm) {
    // As torch.nn.utils.clip_grad_norm_: scaled only when above max_norm.
    const auto coefficient = (*max_norm / (total + 1e-6)).clamp_max(1.0);
    for (auto& gradient : gradients) gradient.mul_(coefficient.to(gradient.dtype()));
  } else {
    for (auto& gradient : gradients) gradient.clamp_(-*clip_val, *clip_val);
  }
  return total;
}

RankZeroFirst Fabric::rank_zero_first(bool local) {
  return RankZeroFirst(*this, local ? local_rank() == 0 : is_global_zero());
}

RankZeroFirst::RankZeroFirst(Fabric& fabric, bool first)
    : fabric_(fabric), first_(first), uncaught_exceptions_(std::uncaught_exceptions()) {
  // The others wait here until the first ones leave their scope.
  if (!first_) fabric_.barrier("fabric.rank_zero_first");
}

RankZeroFirst::~RankZeroFirst() noexcept(false) {
  // A first rank that leaves by an exception does not release the others;
  // the launcher stops the job when that exception ends the process.
  if (first_ && std::uncaught_exceptions() == uncaught_exceptions_) {
    fabric_.barrier("fabric.rank_zero_first");
  }
}

uint64_t seed_everything(uint64_t seed) {
  torch::manual_seed(seed);  // also every CUDA device's generator
  std::srand(static_cast<unsigned>(seed));
  ::setenv("PL_GLOBAL_SEED", std::to_string(seed).c_str(), 1);
  return seed;
}

} // namespace fabric
