#include "engine/Pch.h"

#include "clang/Basic/FileManager.h"
#include "clang/Basic/Version.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/FrontendActions.h"
#include "clang/Tooling/ArgumentsAdjusters.h"
#include "clang/Tooling/Tooling.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fabricize {

namespace {

// The header a PCH covers, and how a source spells its inclusion.
constexpr const char* kHeader = "torch/torch.h";

bool namesLibTorch(const std::string& line) {
  return line.find("<torch/torch.h>") != std::string::npos || line.find("<fabric/fabric.h>") != std::string::npos;
}

// The header an #include line names, and whether it is quoted; "" if the
// line is not an #include.
std::string includedName(const std::string& line, bool& quoted) {
  auto start = line.find_first_not_of(" \t");
  if (start == std::string::npos || line.compare(start, 1, "#") != 0) return "";
  auto directive = line.find_first_not_of(" \t", start + 1);
  if (directive == std::string::npos || line.compare(directive, 7, "include") != 0) return "";
  auto open = line.find_first_of("\"<", directive + 7);
  if (open == std::string::npos) return "";
  quoted = line[open] == '"';
  auto close = line.find(quoted ? '"' : '>', open + 1);
  return close == std::string::npos ? "" : line.substr(open + 1, close - open - 1);
}

}  // namespace

bool reachesLibTorch(const std::string& source, const std::vector<std::string>& includeDirs) {
  // The source, and the headers it includes that are found in its folder or
  // the command's -I folders (the project's own: a multi-file project
  // usually includes LibTorch from its own header), breadth first.
  std::vector<std::string> queue = {source};
  std::set<std::string> seen = {source};
  for (size_t next = 0; next < queue.size() && next < 256; ++next) {
    std::ifstream in(queue[next]);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find("include") == std::string::npos) continue;
      if (namesLibTorch(line)) return true;
      bool quoted = false;
      std::string name = includedName(line, quoted);
      if (name.empty() || llvm::sys::path::is_absolute(name)) continue;
      std::vector<std::string> dirs;
      if (quoted) dirs.push_back(std::string(llvm::sys::path::parent_path(queue[next])));
      dirs.insert(dirs.end(), includeDirs.begin(), includeDirs.end());
      for (const std::string& dir : dirs) {
        llvm::SmallString<256> candidate(dir);
        llvm::sys::path::append(candidate, name);
        llvm::sys::path::remove_dots(candidate, /*remove_dot_dot=*/true);
        if (!llvm::sys::fs::is_regular_file(candidate)) continue;
        if (seen.insert(std::string(candidate)).second) queue.push_back(std::string(candidate));
        break;
      }
    }
  }
  return false;
}

namespace {

bool isUnder(llvm::StringRef path, llvm::StringRef dir) {
  return path == dir || (path.starts_with(dir) && path.size() > dir.size() && path[dir.size()] == '/');
}

// An include folder as an absolute path: relative ones are relative to the
// command's directory; symlinks resolved where the folder exists.
std::string absoluteFolder(llvm::StringRef dir, const std::string& directory) {
  if (dir.starts_with("=") || dir.starts_with("$SYSROOT")) return dir.str();  // sysroot-relative
  llvm::SmallString<256> path(dir);
  if (!llvm::sys::path::is_absolute(path)) {
    path = directory;
    llvm::sys::path::append(path, dir);
  }
  llvm::sys::fs::make_absolute(path);  // a command's directory may be "." itself
  llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
  llvm::SmallString<256> real;
  if (!llvm::sys::fs::real_path(path, real)) return std::string(real);
  return std::string(path);
}

// -f flags that change only diagnostics or code generation, never what the
// preamble means: left out, so they do not split the cache.
bool isOutputOnlyFlag(llvm::StringRef arg) {
  for (llvm::StringRef prefix : {"-fdiagnostics",
                                 "-fcolor-diagnostics",
                                 "-fno-color-diagnostics",
                                 "-fansi-escape-codes",
                                 "-fmessage-length",
                                 "-fcaret-diagnostics",
                                 "-fno-caret-diagnostics",
                                 "-fshow-",
                                 "-fno-show-",
                                 "-ffunction-sections",
                                 "-fno-function-sections",
                                 "-fdata-sections",
                                 "-fno-data-sections",
                                 "-fdebug-",
                                 "-fno-debug-",
                                 "-ffile-prefix-map",
                                 "-fmacro-prefix-map",
                                 "-fprofile-",
                                 "-fno-profile-",
                                 "-fcoverage-",
                                 "-ftest-coverage",
                                 "-fstack-protector",
                                 "-fno-stack-protector",
                                 "-fomit-frame-pointer",
                                 "-fno-omit-frame-pointer",
                                 "-fpch-",
                                 "-fno-pch-",
                                 "-ftime-trace",
                                 "-fcrash-diagnostics",
                                 "-fstandalone-debug",
                                 "-fno-standalone-debug"})
    if (arg.starts_with(prefix)) return true;
  return false;
}

std::string keyOf(const std::vector<std::string>& flags, const PchOptions& options) {
  llvm::SHA256 hash;
  auto add = [&](llvm::StringRef s) {
    hash.update(s);
    hash.update(llvm::StringRef("\0", 1));
  };
  add(CLANG_VERSION_STRING);
  add("declarations-only");  // how the PCH is built: not shared with older builds
  add(options.resourceDir);
  for (const std::string& a : options.extraArguments) add(a);
  for (const std::string& f : flags) add(f);
  auto digest = hash.final();
  return llvm::toHex(llvm::ArrayRef<uint8_t>(digest.data(), 8), /*LowerCase=*/true);
}

// LibTorch's declarations without its function bodies. No rule looks into
// them (the engine skips them when it parses LibTorch itself), and a PCH
// without them spares every parse the templates LibTorch's inline code
// would instantiate: ~1.7 s -> ~0.3 s per translation unit. Sema still
// parses what types depend on (constexpr functions, deduced return types).
class DeclarationsOnlyPchAction : public clang::GeneratePCHAction {
  bool BeginInvocation(clang::CompilerInstance& ci) override {
    ci.getFrontendOpts().SkipFunctionBodies = true;
    return clang::GeneratePCHAction::BeginInvocation(ci);
  }
};

// --- the cache's bookkeeping --------------------------------------------------

std::mutex cacheLock;
std::set<std::string> usedThisRun;  // file names never evicted by this process
bool sweptOnce = false;

// Whether a build holds `tempPath` (it keeps an exclusive flock on it while
// it runs; the lock goes with its process).
bool heldByABuild(const std::string& tempPath) {
  int fd = ::open(tempPath.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // releases the lock taken, if any
  return held;
}

// The temporary file a build named `name` after: torch-<key>.pch.tmp-XXXXXX,
// which Clang's own temporary (torch-<key>.pch.tmp-XXXXXX-YYYYYYYY.tmp)
// extends.
std::string buildTempOf(llvm::StringRef name) {
  size_t at = name.find(".pch.tmp-");
  if (at == llvm::StringRef::npos) return {};
  size_t end = name.find('-', at + strlen(".pch.tmp-"));
  return name.substr(0, end).str();
}

// Removes stale temporaries, then evicts least recently used PCHs (oldest
// modification time: a use touches it) until the cache fits its limit.
void trimCache(const PchOptions& options) {
  struct Entry {
    std::string path;
    uint64_t size = 0;
    llvm::sys::TimePoint<> modified;
  };
  std::vector<Entry> pchs, temps, headers;
  uint64_t total = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(options.cacheDir, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (!name.starts_with("torch-")) continue;
    llvm::sys::fs::file_status status;
    if (llvm::sys::fs::status(it->path(), status) || status.type() != llvm::sys::fs::file_type::regular_file) continue;
    Entry entry{it->path(), status.getSize(), status.getLastModificationTime()};
    if (name.contains(".pch.tmp-")) {
      temps.push_back(entry);
    } else if (name.ends_with(".pch")) {
      total += entry.size;
      pchs.push_back(entry);
    } else if (name.ends_with(".h")) {
      headers.push_back(entry);
    }
  }
  auto now = std::chrono::system_clock::now();
  auto stale = [&](const Entry& e) { return now - e.modified > std::chrono::minutes(kStalePchTempMinutes); };
  std::set<std::string> building;  // keys with a build in progress
  for (const Entry& temp : temps) {
    std::string name = llvm::sys::path::filename(temp.path).str();
    std::string owner = (llvm::sys::path::parent_path(temp.path) + "/" + buildTempOf(name)).str();
    if (heldByABuild(owner)) {
      building.insert(name.substr(0, name.find(".pch.tmp-")));
      continue;
    }
    if (!stale(temp)) continue;
    if (!llvm::sys::fs::remove(temp.path) && options.verbose)
      llvm::errs() << "fabricize: removed " << temp.path << " (left by an interrupted PCH build)\n";
  }

  std::sort(pchs.begin(), pchs.end(), [](const Entry& a, const Entry& b) { return a.modified < b.modified; });
  std::set<std::string> present;
  for (const Entry& pch : pchs) {
    if (total <= options.cacheLimitBytes || usedThisRun.count(llvm::sys::path::filename(pch.path).str())) {
      present.insert(llvm::sys::path::stem(pch.path).str());
      continue;
    }
    if (llvm::sys::fs::remove(pch.path)) {
      present.insert(llvm::sys::path::stem(pch.path).str());
      continue;
    }
    total -= pch.size;
    if (options.verbose)
      llvm::errs() << "fabricize: evicted " << pch.path << " (" << (pch.size >> 20)
                   << " MiB, least recently used) to keep the PCH cache under " << (options.cacheLimitBytes >> 20)
                   << " MiB\n";
  }
  if (total > options.cacheLimitBytes && options.verbose)
    llvm::errs() << "fabricize: the PCH cache holds " << (total >> 20) << " MiB, over its "
                 << (options.cacheLimitBytes >> 20) << " MiB limit: the PCHs this run uses are kept\n";
  // The header each PCH was built from goes with it.
  for (const Entry& header : headers) {
    std::string stem = llvm::sys::path::stem(header.path).str();
    if (present.count(stem) || building.count(stem) || !stale(header)) continue;
    llvm::sys::fs::remove(header.path);
  }
}

void markUsed(const std::string& pch, bool touch) {
  usedThisRun.insert(llvm::sys::path::filename(pch).str());
  // The modification time is the cache's "last used", to the hour: the
  // language server's preambles record the time of the PCH they are chained
  // on, and a touch at every analysis would make them stale.
  if (!touch) return;
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(pch, status) &&
      std::chrono::system_clock::now() - status.getLastModificationTime() < std::chrono::hours(1))
    return;
  ::utimensat(AT_FDCWD, pch.c_str(), nullptr, 0);
}

// Writes `text` to `path` unless it holds it already: a PCH records its
// header's modification time, so rewriting it would make the PCH stale.
bool writeIfChanged(const std::string& path, const std::string& text) {
  std::ifstream in(path);
  std::stringstream current;
  current << in.rdbuf();
  if (in && current.str() == text) return true;
  // Under a unique name, renamed: a concurrent reader never sees half of it.
  llvm::SmallString<256> temp;
  int fd = -1;
  if (llvm::sys::fs::createUniqueFile(path + ".%%%%%%", fd, temp)) return false;
  {
    llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
    out << text;
    if (out.has_error()) {
      out.clear_error();
      llvm::sys::fs::remove(temp);
      return false;
    }
  }
  if (llvm::sys::fs::rename(temp, path)) {
    llvm::sys::fs::remove(temp);
    return false;
  }
  return true;
}

}  // namespace

// The -I and -iquote folders of a command, absolute.
std::vector<std::string> projectIncludeDirs(const clang::tooling::CompileCommand& command) {
  std::vector<std::string> dirs;
  const std::vector<std::string>& args = command.CommandLine;
  for (size_t i = 1; i < args.size(); ++i) {
    llvm::StringRef arg = args[i];
    for (llvm::StringRef flag : {"-iquote", "-I"}) {
      if (!arg.starts_with(flag)) continue;
      llvm::StringRef dir = arg.drop_front(flag.size());
      if (dir.empty() && i + 1 < args.size()) dir = args[++i];
      if (!dir.empty()) dirs.push_back(absoluteFolder(dir, command.Directory));
      break;
    }
  }
  return dirs;
}

std::vector<std::string> pchFlagsFor(const clang::tooling::CompileCommand& command, const PchOptions& options) {
  using namespace clang::tooling;
  std::vector<std::string> args = command.CommandLine;
  args = getClangStripOutputAdjuster()(args, command.Filename);
  args = getClangStripDependencyFileAdjuster()(args, command.Filename);
  auto isProjects = [&](const std::string& dir) {
    for (const std::string& project : options.projectDirs)
      if (!project.empty() && isUnder(dir, project)) return true;
    return false;
  };
  // Folders the engine adds to every command anyway (the runtime's headers,
  // which a migrated project also names): already in the key, once.
  std::set<std::string> engineFolders;
  for (size_t i = 0; i + 1 < options.extraArguments.size(); ++i)
    if (options.extraArguments[i] == "-isystem")
      engineFolders.insert(absoluteFolder(options.extraArguments[i + 1], "/"));
  std::vector<std::string> flags;
  for (size_t i = 1; i < args.size(); ++i) {  // [0] is the compiler
    llvm::StringRef arg = args[i];
    bool hasNext = i + 1 < args.size();
    // Include folders: -I<dir>, -I <dir>, -isystem <dir> ...
    bool isInclude = false;
    for (llvm::StringRef flag : {"-isystem", "-idirafter", "-cxx-isystem", "-iquote", "-I", "-F"}) {
      if (!arg.starts_with(flag)) continue;
      llvm::StringRef dir = arg.drop_front(flag.size());
      if (dir.empty()) {
        if (!hasNext) break;
        dir = args[++i];
      }
      isInclude = true;
      // Quoted includes never find <torch/torch.h>; a project's -I folder is
      // its own headers. System folders (how CMake passes an imported
      // LibTorch, even one vendored inside the project) and anything outside
      // the project are where LibTorch may be found.
      if (flag == "-iquote") break;
      std::string absolute = absoluteFolder(dir, command.Directory);
      if (((flag == "-I" || flag == "-F") && isProjects(absolute)) || engineFolders.count(absolute)) break;
      flags.push_back(flag.str());
      flags.push_back(absolute);
      break;
    }
    if (isInclude) continue;
    if (arg == "-D" || arg == "-U") {
      if (hasNext) flags.insert(flags.end(), {arg.str(), args[++i]});
    } else if (arg == "-target" || arg == "--sysroot" || arg == "-isysroot") {
      if (hasNext) flags.insert(flags.end(), {arg.str(), args[++i]});
    } else if (arg == "-x" || arg == "-include" || arg == "-imacros" || arg == "-Xclang" || arg == "-mllvm" ||
               arg == "-MF" || arg == "-MT" || arg == "-MQ" || arg == "-o" || arg == "-Xpreprocessor") {
      ++i;  // with its value: the project's preamble, or not about the language
    } else if (arg.starts_with("-D") || arg.starts_with("-U") || arg.starts_with("-std=") ||
               arg.starts_with("--std=") || arg.starts_with("--target=") || arg.starts_with("--sysroot=") ||
               arg.starts_with("--gcc-toolchain=") || arg.starts_with("-stdlib=") || arg.starts_with("-O") ||
               arg == "-pthread" || arg == "-ansi" || arg == "-nostdinc" || arg == "-nostdinc++" ||
               arg == "-nostdlibinc" || arg == "-nobuiltininc" || (arg.starts_with("-m") && arg.size() > 2) ||
               (arg.starts_with("-f") && !isOutputOnlyFlag(arg))) {
      flags.push_back(arg.str());
    }
    // Anything else (the input, -c, -W..., -g...) does not change the preamble.
  }
  return flags;
}

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

bool pchCacheLimitMiB(const std::string& option, uint64_t& mib, std::string& error) {
  std::string value = option, source = "--pch-cache-size";
  if (value.empty()) {
    const char* env = std::getenv("FABRICIZE_PCH_CACHE_MB");
    if (!env || !*env) {
      mib = kDefaultPchCacheMiB;
      return true;
    }
    value = env;
    source = "FABRICIZE_PCH_CACHE_MB";
  }
  // At most 9 digits (~1 PiB): no overflow once shifted to bytes.
  if (value.size() > 9 || value.find_first_not_of("0123456789") != std::string::npos) {
    error = source + " takes the PCH cache's size limit in MiB (a whole number, 0 keeps only what a run uses), got '" +
            value + "'";
    return false;
  }
  mib = std::stoull(value);
  return true;
}

std::optional<std::string> torchPchFor(const std::string& source, const clang::tooling::CompileCommand& command,
                                       const PchOptions& options) {
  if (options.cacheDir.empty() || !reachesLibTorch(source, projectIncludeDirs(command))) return std::nullopt;
  std::vector<std::string> flags = pchFlagsFor(command, options);
  std::string key = keyOf(flags, options);
  llvm::SmallString<256> pch(options.cacheDir);
  llvm::sys::path::append(pch, "torch-" + key + ".pch");
  std::lock_guard<std::mutex> lock(cacheLock);
  if (llvm::sys::fs::exists(pch)) {
    markUsed(std::string(pch), /*touch=*/true);
    if (!sweptOnce) trimCache(options);  // once a run: a limit lowered since, temporaries left over
    sweptOnce = true;
    return std::string(pch);
  }

  if (llvm::sys::fs::create_directories(options.cacheDir)) return std::nullopt;
  llvm::SmallString<256> header(options.cacheDir);
  llvm::sys::path::append(header, "torch-" + key + ".h");
  if (!writeIfChanged(std::string(header), std::string("#include <") + kHeader + ">\n")) return std::nullopt;
  // Built under a unique name and renamed: concurrent runs never see half a
  // PCH. The name is locked while the build runs, so a cleanup by another
  // run leaves it alone; the lock ends with this process.
  llvm::SmallString<256> temp;
  int fd = -1;
  if (llvm::sys::fs::createUniqueFile(pch + ".tmp-%%%%%%", fd, temp)) return std::nullopt;
  ::flock(fd, LOCK_EX | LOCK_NB);

  std::vector<std::string> args = {"clang++", "-x", "c++-header", "-resource-dir=" + options.resourceDir};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), options.extraArguments.begin(), options.extraArguments.end());
  args.insert(args.end(), {"-o", std::string(temp), std::string(header)});
  if (options.verbose) llvm::errs() << "fabricize: building a LibTorch PCH for these flags (once): " << pch << "\n";
  llvm::IntrusiveRefCntPtr<clang::FileManager> files(new clang::FileManager(clang::FileSystemOptions()));
  clang::tooling::ToolInvocation invocation(args, std::make_unique<DeclarationsOnlyPchAction>(), files.get());
  bool built = invocation.run();
  if (!built || llvm::sys::fs::rename(temp, pch)) {
    llvm::sys::fs::remove(temp);
    llvm::sys::Process::SafelyCloseFileDescriptor(fd);
    return std::nullopt;
  }
  llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  markUsed(std::string(pch), /*touch=*/false);
  trimCache(options);
  sweptOnce = true;
  return std::string(pch);
}

}  // namespace fabricize
