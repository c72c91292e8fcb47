// A precompiled <torch/torch.h> per distinct set of compile flags, built
// once in-process with the Clang the tool links and cached on disk. Parsing
// LibTorch costs ~15 s per translation unit; with the PCH a few seconds.
#pragma once

#include "clang/Tooling/CompilationDatabase.h"

#include <optional>
#include <string>
#include <vector>

namespace fabricize {

struct PchOptions {
  std::string cacheDir;                     // empty: no PCH
  std::vector<std::string> extraArguments;  // the engine's own, so the flags match
  std::string resourceDir;
  bool verbose = false;
};

// The PCH to use for `source` compiled with `command`, building it if
// needed; nothing when the source does not include LibTorch or the PCH
// cannot be built (the caller then parses without one).
std::optional<std::string> torchPchFor(const std::string& source,
                                       const clang::tooling::CompileCommand& command,
                                       const PchOptions& options);

// Where PCHs are cached by default: $FABRICIZE_CACHE_DIR, else
// $XDG_CACHE_HOME/fabricize, else ~/.cache/fabricize.
std::string defaultPchCacheDir();

}  // namespace fabricize
