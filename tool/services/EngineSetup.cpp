#include "services/EngineSetup.h"

#include "engine/Pch.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace fabricize {

EngineOptions engineOptionsFor(const std::string& projectRoot, const char* argv0, bool usePch,
                               const std::vector<std::string>& extraArgs) {
  // The runtime's headers: next to an installed fabricize, else the source tree.
  std::string exe = llvm::sys::fs::getMainExecutable(argv0, reinterpret_cast<void*>(&engineOptionsFor));
  llvm::SmallString<256> installed(llvm::sys::path::parent_path(llvm::sys::path::parent_path(exe)));
  llvm::sys::path::append(installed, "include");
  llvm::SmallString<256> header(installed);
  llvm::sys::path::append(header, "fabric", "fabric.h");
  std::string runtimeInclude = llvm::sys::fs::exists(header) ? std::string(installed) : FABRIC_RUNTIME_INCLUDE_DIR;
  EngineOptions options;
  options.projectRoot = projectRoot;
  options.resourceDir = FABRIC_CLANG_RESOURCE_DIR;
  options.extraArguments = {"-w", "-isystem", runtimeInclude};
  // GCC has no limit on nested brackets (a fold expression over 257 enum
  // values, as reflection headers write, is 257 deep: Clang stops at 256)
  // and evaluates 2^33 constexpr operations where Clang stops at 2^20.
  options.extraArguments.insert(options.extraArguments.end(), {"-fbracket-depth=4096", "-fconstexpr-steps=134217728"});
  options.extraArguments.insert(options.extraArguments.end(), extraArgs.begin(), extraArgs.end());
  if (usePch) {  // as migrate does: LibTorch parsed once per flag set, cached on disk
    options.pch.cacheDir = defaultPchCacheDir();
    options.pch.extraArguments = options.extraArguments;
    options.pch.resourceDir = options.resourceDir;
    options.pch.projectDirs = {projectRoot};
    uint64_t mib = kDefaultPchCacheMiB;
    std::string error;  // a bad $FABRICIZE_PCH_CACHE_MB: the front ends report it before this
    if (!pchCacheLimitMiB("", mib, error)) mib = kDefaultPchCacheMiB;
    options.pch.cacheLimitBytes = mib << 20;
  }
  return options;
}

}  // namespace fabricize
