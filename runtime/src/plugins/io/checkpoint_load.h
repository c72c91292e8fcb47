// Reading checkpoints for fabric.load: the checks every load starts with,
// module values copied in place, and the agreement of the ranks on the
// outcome. Every error is a fabric::CheckpointError (a c10::Error, as
// torch::load throws) whose message names the file, what is wrong and what
// to do.
#pragma once

#include <fabric/types.h>

#include "plugins/collectives/collectives.h"
#include "utilities/messages.h"

#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace fabric {
namespace detail {

// Throws a CheckpointError when a record of the zip archive at `path` fails
// its CRC-32 check (LibTorch's reader does not check them). A file that is
// not a zip archive is left to the reader. Defined in checkpoint_io.cpp.
void verify_checkpoint_checksums(const std::string& path);

// The start of every load: the file exists, is a file, is readable, passes
// the CRC checks and parses as an archive.
void open_checkpoint(const std::string& path, torch::serialize::InputArchive& archive, torch::Device device);

// Module::load would set_() every parameter to the file's tensor. A
// parameter whose storage is swapped that way is no longer reduced by the
// c10d::Reducer watching it (ranks then drift apart), so values are copied
// into the existing tensors instead, with shape checks Module::load lacks.
// First every tensor is found and checked (`copies`: target, value), then
// copied, so that a checkpoint that does not fit changes nothing.
using TensorCopies = std::vector<std::pair<torch::Tensor, torch::Tensor>>;
// With `partial` (one rank's part of a sharded checkpoint) tensors and
// submodules the archive lacks are skipped.
void collect_module_tensors(torch::nn::Module& module, torch::serialize::InputArchive& archive,
                            const std::string& prefix, TensorCopies& copies, bool partial = false);
void copy_module_tensors(const TensorCopies& copies);

// Runs one part of a load on this rank; returns what went wrong ("" if
// nothing), as the message of the CheckpointError every rank will throw.
template <class Function>
std::string load_error_of(const std::string& path, Function&& function) {
  try {
    function();
    return {};
  } catch (const CheckpointError& error) {
    return error.what_without_backtrace();
  } catch (const std::exception& error) {
    const std::string message = message_of(error);
    return "fabric::load: '" + path + "': " + (message.empty() ? "unknown error" : message);
  }
}

// Every rank ran the same part of a load; `local_error` is empty where it
// worked. If it failed anywhere, every rank throws the same CheckpointError
// (the first failing rank's), so that no rank goes on to train while
// another one stopped (a checkpoint that only some ranks can see). One
// all-reduce of world_size integers, plus a broadcast on failure.
void agree_on_load(Collectives& collectives, const std::string& local_error);

}  // namespace detail
}  // namespace fabric
