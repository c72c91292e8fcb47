// The checkpoint IO plugin (Lightning's CheckpointIO): how a checkpoint's
// bytes reach a file and come back. The default writes atomically (a
// temporary, fsync, rename, fsync of the directory) and checks every
// record's CRC-32 before LibTorch's reader parses an archive. Owned by the
// strategy; what goes into a checkpoint (fabric::State, sharded parts) is
// checkpoints.cpp's and sharded_checkpoints.cpp's.
#pragma once

#include <torch/torch.h>

#include <string>

namespace fabric {
namespace detail {

class CheckpointIO {
 public:
  virtual ~CheckpointIO() = default;
  // Writes `bytes` to temporary_path_for(path) (created anew, never through
  // a symlink), syncs it and renames it over `path`. Throws
  // std::runtime_error.
  virtual void write(const std::string& path, const std::string& bytes) const;
  // Throws a CheckpointError when a record of the zip archive at `path`
  // fails its CRC-32 check (LibTorch's reader does not check them).
  virtual void verify(const std::string& path) const;
  // The start of every load: the file exists, is a file, is readable,
  // passes the CRC checks and parses as an archive.
  virtual void open(const std::string& path, torch::serialize::InputArchive& archive, torch::Device device) const;
};

}  // namespace detail
}  // namespace fabric
