// See checkpoint_load.h.
#include "plugins/io/checkpoint_load.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace fabric {
namespace detail {

namespace {
std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  return text;
}
}  // namespace

void collect_module_tensors(torch::nn::Module& module, torch::serialize::InputArchive& archive,
                            const std::string& prefix, TensorCopies& copies, bool partial) {
  const auto collect = [&](const std::string& name, const torch::Tensor& target, bool is_buffer) {
    torch::Tensor loaded;
    if (!archive.try_read(name, loaded, is_buffer)) {
      if (partial) return;
      throw std::runtime_error("the checkpoint has no " + std::string(is_buffer ? "buffer '" : "parameter '") + prefix +
                               name + "'");
    }
    if (loaded.sizes() != target.sizes()) {
      throw std::runtime_error(prefix + name + " has shape " + c10::str(loaded.sizes()) + " in the checkpoint but " +
                               c10::str(target.sizes()) + " in the model");
    }
    copies.emplace_back(target, loaded);
  };
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    collect(item.key(), item.value(), false);
  }
  for (const auto& item : module.named_buffers(/*recurse=*/false)) {
    collect(item.key(), item.value(), true);
  }
  for (const auto& child : module.named_children()) {
    torch::serialize::InputArchive child_archive;
    if (!archive.try_read(child.key(), child_archive)) {
      if (partial) continue;
      throw std::runtime_error("the checkpoint has no submodule '" + prefix + child.key() + "'");
    }
    collect_module_tensors(*child.value(), child_archive, prefix + child.key() + ".", copies, partial);
  }
}

void copy_module_tensors(const TensorCopies& copies) {
  torch::NoGradGuard no_grad;
  for (const auto& [target, loaded] : copies) {
    torch::Tensor destination = target;
    destination.copy_(loaded);
  }
}

void open_checkpoint(const std::string& path, torch::serialize::InputArchive& archive, torch::Device device) {
  struct stat status{};
  if (::stat(path.c_str(), &status) != 0) {
    const int error = errno;
    throw CheckpointError("fabric::load: cannot open '" + path + "': " + std::strerror(error) +
                          (error == ENOENT ? ". There is no checkpoint at that path: check it, or catch c10::Error "
                                             "around fabric.load to start without one"
                                           : ""));
  }
  if (S_ISDIR(status.st_mode)) {
    throw CheckpointError("fabric::load: '" + path +
                          "' is a directory, not a checkpoint file: pass the file's path; a sharded checkpoint "
                          "(written under fsdp) is loaded whole, through the fabric::State it was saved from: "
                          "fabric.load(path, state)");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw CheckpointError("fabric::load: cannot open '" + path + "': " + std::strerror(errno));
  }
  ::close(fd);
  verify_checkpoint_checksums(path);
  try {
    archive.load_from(path, device);
  } catch (const std::exception& error) {
    throw CheckpointError("fabric::load: '" + path + "' is not a readable checkpoint (truncated or corrupted?): " +
                          first_line_of(message_of(error)).substr(0, 300) +
                          ". Restore a good copy, or delete it to start without it");
  }
}

void agree_on_load(Collectives& collectives, const std::string& local_error) {
  const ProcessPlacement& placement = collectives.placement();
  if (placement.world_size == 1) {
    if (!local_error.empty()) throw CheckpointError(local_error);
    return;
  }
  auto failed = torch::zeros({placement.world_size}, torch::kLong);
  failed.accessor<int64_t, 1>()[placement.global_rank] = local_error.empty() ? 0 : 1;
  const auto everybody = collectives.all_reduce(failed, ReduceOp::Sum).cpu();
  std::vector<int> failing;
  std::vector<int> fine;
  for (int rank = 0; rank < placement.world_size; ++rank) {
    (everybody.accessor<int64_t, 1>()[rank] != 0 ? failing : fine).push_back(rank);
  }
  if (failing.empty()) return;
  std::string message = collectives.broadcast(local_error, failing.front());
  if (!fine.empty()) {
    message += " [on " + rank_list(failing) + " only; " + rank_list(fine) +
               " could read it. Every rank reads the checkpoint itself: it must be at that path "
               "on a file system that every rank sees]";
  }
  throw CheckpointError(message);
}

}  // namespace detail
}  // namespace fabric
