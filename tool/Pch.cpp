#include "Pch.h"

#include "clang/Basic/FileManager.h"
#include "clang/Basic/Version.h"
#include "clang/Frontend/FrontendActions.h"
#include "clang/Tooling/ArgumentsAdjusters.h"
#include "clang/Tooling/Tooling.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace fabricize {

namespace {

// The header a PCH covers, and how a source spells its inclusion.
constexpr const char* kHeader = "torch/torch.h";

bool includesLibTorch(const std::string& source) {
  std::ifstream in(source);
  std::string line;
  while (std::getline(in, line)) {
    auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line.compare(start, 1, "#") != 0) continue;
    if (line.find("include") == std::string::npos) continue;
    if (line.find("<torch/torch.h>") != std::string::npos || line.find("<fabric/fabric.h>") != std::string::npos)
      return true;
  }
  return false;
}

// The command's flags with the input, the output and dependency files
// removed: what decides whether a PCH fits.
std::vector<std::string> languageFlags(const clang::tooling::CompileCommand& command,
                                       const PchOptions& options) {
  using namespace clang::tooling;
  std::vector<std::string> args = command.CommandLine;
  args = getClangStripOutputAdjuster()(args, command.Filename);
  args = getClangStripDependencyFileAdjuster()(args, command.Filename);
  std::vector<std::string> flags;
  for (size_t i = 1; i < args.size(); ++i) {  // [0] is the compiler
    const std::string& arg = args[i];
    if (arg == command.Filename || arg == "-c" || arg == "-fsyntax-only" || arg == "--") continue;
    if (llvm::sys::path::filename(arg) == llvm::sys::path::filename(command.Filename) &&
        llvm::sys::fs::equivalent(arg, command.Filename))
      continue;
    flags.push_back(arg);
  }
  flags.push_back("-resource-dir=" + options.resourceDir);
  flags.insert(flags.end(), options.extraArguments.begin(), options.extraArguments.end());
  return flags;
}

std::string keyOf(const std::vector<std::string>& flags, const std::string& directory) {
  llvm::SHA256 hash;
  hash.update(CLANG_VERSION_STRING);
  hash.update(directory);  // relative -I paths depend on it
  for (const std::string& f : flags) {
    hash.update(f);
    hash.update(llvm::StringRef("\0", 1));
  }
  auto digest = hash.final();
  return llvm::toHex(llvm::ArrayRef<uint8_t>(digest.data(), 8), /*LowerCase=*/true);
}

}  // namespace

std::string defaultPchCacheDir() {
  if (const char* dir = std::getenv("FABRICIZE_CACHE_DIR"); dir && *dir) return dir;
  llvm::SmallString<256> path;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    path = xdg;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    path = home;
    llvm::sys::path::append(path, ".cache");
  } else {
    return {};
  }
  llvm::sys::path::append(path, "fabricize");
  return std::string(path);
}

std::optional<std::string> torchPchFor(const std::string& source,
                                       const clang::tooling::CompileCommand& command,
                                       const PchOptions& options) {
  if (options.cacheDir.empty() || !includesLibTorch(source)) return std::nullopt;
  std::vector<std::string> flags = languageFlags(command, options);
  std::string key = keyOf(flags, command.Directory);
  llvm::SmallString<256> pch(options.cacheDir);
  llvm::sys::path::append(pch, "torch-" + key + ".pch");
  if (llvm::sys::fs::exists(pch)) return std::string(pch);

  if (llvm::sys::fs::create_directories(options.cacheDir)) return std::nullopt;
  llvm::SmallString<256> header(options.cacheDir);
  llvm::sys::path::append(header, "torch-" + key + ".h");
  {
    std::ofstream out(std::string(header.str()));
    out << "#include <" << kHeader << ">\n";
    if (!out) return std::nullopt;
  }
  // Built under a unique name and renamed: concurrent runs never see half a PCH.
  llvm::SmallString<256> temp;
  int fd = -1;
  if (llvm::sys::fs::createUniqueFile(pch + ".tmp-%%%%%%", fd, temp)) return std::nullopt;
  llvm::sys::Process::SafelyCloseFileDescriptor(fd);

  std::vector<std::string> args = {"clang++", "-x", "c++-header"};
  args.insert(args.end(), flags.begin(), flags.end());
  // Instantiating templates into the PCH is what makes later parses cheap.
  args.insert(args.end(), {"-fpch-instantiate-templates", "-o", std::string(temp), std::string(header)});
  if (options.verbose) llvm::errs() << "fabricize: building a LibTorch PCH for these flags (once): " << pch << "\n";
  llvm::IntrusiveRefCntPtr<clang::FileManager> files(new clang::FileManager(clang::FileSystemOptions()));
  clang::tooling::ToolInvocation invocation(args, std::make_unique<clang::GeneratePCHAction>(), files.get());
  bool built = invocation.run();
  if (!built || llvm::sys::fs::rename(temp, pch)) {
    llvm::sys::fs::remove(temp);
    return std::nullopt;
  }
  return std::string(pch);
}

}  // namespace fabricize
