// A precompiled <torch/torch.h>, built once in-process with the Clang the
// tool links and cached on disk. Parsing LibTorch costs ~15 s per
// translation unit; with the PCH a few seconds.
//
// One PCH serves every project that sees LibTorch the same way: it is keyed
// and built only by what changes the LibTorch preamble (Clang's version, the
// language standard and language flags, defines, and the include folders
// outside the project, where LibTorch is found). A project's own -I folders
// are left out: Clang does not check a PCH's search paths, so a translation
// unit with more of them uses it as is. The cache is bounded: least recently
// used PCHs are evicted past a size limit, never one this run uses, and the
// temporary files of interrupted builds are removed.
#pragma once

#include "clang/Tooling/CompilationDatabase.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fabricize {

// The cache's size limit unless --pch-cache-size or $FABRICIZE_PCH_CACHE_MB
// says otherwise: room for ~26 PCHs of LibTorch 1.13 (~78 MB each).
inline constexpr uint64_t kDefaultPchCacheMiB = 2048;
// Temporary files of a build this old whose build no process holds are left
// over from an interrupted run.
inline constexpr int kStalePchTempMinutes = 10;

struct PchOptions {
  std::string cacheDir;                     // empty: no PCH
  std::vector<std::string> extraArguments;  // the engine's own, so the flags match
  std::string resourceDir;
  // The project's own folders (its root, its build directory): include
  // folders under them are the project's, not LibTorch's, and neither key
  // nor build the PCH.
  std::vector<std::string> projectDirs;
  uint64_t cacheLimitBytes = kDefaultPchCacheMiB << 20;
  bool verbose = false;
};

// The PCH to use for `source` compiled with `command`, building it if
// needed; nothing when the source does not include LibTorch or the PCH
// cannot be built (the caller then parses without one).
std::optional<std::string> torchPchFor(const std::string& source, const clang::tooling::CompileCommand& command,
                                       const PchOptions& options);

// Whether `source` includes <torch/torch.h> (or <fabric/fabric.h>) itself or
// through the headers it includes from its folder and `includeDirs` (a
// project's own headers): only then does a PCH of LibTorch apply to it.
bool reachesLibTorch(const std::string& source, const std::vector<std::string>& includeDirs);

// The -I and -iquote folders of `command`, absolute.
std::vector<std::string> projectIncludeDirs(const clang::tooling::CompileCommand& command);

// The flags a PCH for `command` is keyed by and built with (see above).
std::vector<std::string> pchFlagsFor(const clang::tooling::CompileCommand& command, const PchOptions& options);

// Where PCHs are cached by default: $FABRICIZE_CACHE_DIR, else
// $XDG_CACHE_HOME/fabricize, else ~/.cache/fabricize.
std::string defaultPchCacheDir();

// The size limit in MiB: `option` (--pch-cache-size) when given, else
// $FABRICIZE_PCH_CACHE_MB, else kDefaultPchCacheMiB. False, with `error`,
// for a value that is not a whole number of MiB.
bool pchCacheLimitMiB(const std::string& option, uint64_t& mib, std::string& error);

}  // namespace fabricize
