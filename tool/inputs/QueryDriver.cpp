#include "inputs/QueryDriver.h"

#include "clang/Basic/Diagnostic.h"
#include "clang/Basic/DiagnosticOptions.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/CompilerInvocation.h"
#include "clang/Frontend/Utils.h"
#include "clang/Lex/HeaderSearchOptions.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <mutex>
#include <set>

namespace fabricize {

namespace {

struct DriverInfo {
  std::vector<std::string> added;  // folders for -idirafter, in GCC's order
  std::string hint;                // what may be wrong, for a parse failure
  bool warn = false;               // the query failed: said once, right away
};

std::mutex cacheLock;
std::map<std::string, DriverInfo> cache;   // (compiler, language, flags) -> what to add
std::map<std::string, std::string> hints;  // compiler path -> what may have gone wrong
std::set<std::string> warned;              // compilers a warning was printed for

std::string realPathOr(const std::string& path) {
  llvm::SmallString<256> real;
  if (llvm::sys::fs::real_path(path, real)) return path;
  return std::string(real);
}

// The compiler as the command names it, made absolute (relative to the
// command's directory, or found on PATH) but with its symlinks kept: the
// folder it is named in is what trust is decided on.
std::string compilerPath(const clang::tooling::CompileCommand& command) {
  if (command.CommandLine.empty()) return {};
  const std::string& name = command.CommandLine.front();
  if (name.find('/') == std::string::npos) {
    llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName(name);
    return found ? *found : name;
  }
  llvm::SmallString<256> path(name);
  if (!llvm::sys::path::is_absolute(path)) {
    path = command.Directory;
    llvm::sys::path::append(path, name);
  }
  llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
  return std::string(path);
}

// g++, gcc, c++, cc, and those with a target prefix or a version suffix
// (x86_64-linux-gnu-g++-12); never clang's names.
bool looksLikeGcc(llvm::StringRef path) {
  llvm::StringRef name = llvm::sys::path::filename(path);
  if (name.contains("clang")) return false;
  // Drop a version suffix: -12, -12.2.
  size_t dash = name.rfind('-');
  if (dash != llvm::StringRef::npos && dash + 1 < name.size() &&
      name.substr(dash + 1).find_first_not_of("0123456789.") == llvm::StringRef::npos)
    name = name.take_front(dash);
  for (llvm::StringRef gcc : {"g++", "gcc", "c++", "cc"})
    if (name == gcc || name.ends_with(("-" + gcc).str())) return true;
  return false;
}

bool isTrusted(const std::string& path, const std::string& resolved, const std::vector<std::string>& globs) {
  llvm::StringRef dir = llvm::sys::path::parent_path(path);
  for (const std::string& trusted : trustedCompilerDirs())
    if (dir == trusted) return true;
  for (const std::string& glob : globs) {
    llvm::Expected<llvm::GlobPattern> pattern = llvm::GlobPattern::create(glob);
    if (!pattern) {
      llvm::consumeError(pattern.takeError());
      continue;
    }
    if (pattern->match(path) || pattern->match(resolved)) return true;
  }
  return false;
}

// The flags that change which system folders a driver searches: for GCC's
// query, and for Clang's driver (which knows neither GCC's -f flags nor
// needs them for this).
void languageFlags(const std::vector<std::string>& args, std::vector<std::string>& gcc, std::vector<std::string>& clang,
                   std::string& language) {
  for (size_t i = 1; i < args.size(); ++i) {
    llvm::StringRef arg = args[i];
    bool hasNext = i + 1 < args.size();
    if (arg == "-x" && hasNext) {
      language = args[++i];
    } else if ((arg == "--sysroot" || arg == "-isysroot") && hasNext) {
      gcc.insert(gcc.end(), {args[i], args[i + 1]});
      clang.insert(clang.end(), {args[i], args[i + 1]});
      ++i;
    } else if (arg == "-target" && hasNext) {
      clang.insert(clang.end(), {args[i], args[i + 1]});
      ++i;
    } else if (arg == "-mllvm" || arg == "-Xclang") {
      ++i;  // a value for Clang's internals
    } else if (arg.starts_with("-std=") || arg.starts_with("--std=") || arg.starts_with("--sysroot=") ||
               arg == "-nostdinc" || arg == "-nostdinc++" || (arg.starts_with("-m") && arg.size() > 2)) {
      gcc.push_back(arg.str());
      clang.push_back(arg.str());
    } else if (arg.starts_with("-f")) {
      gcc.push_back(arg.str());
    } else if (arg.starts_with("-stdlib=") || arg.starts_with("--target=") || arg.starts_with("--gcc-toolchain=")) {
      clang.push_back(arg.str());
    }
  }
}

// The `#include <...> search starts here:` list of `<compiler> -E -v`.
bool askGcc(const std::string& compiler, const std::string& language, const std::vector<std::string>& flags,
            std::vector<std::string>& dirs, bool& isGcc, std::string& why) {
  llvm::SmallString<128> log;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("fabricize-driver", "txt", log)) {
    why = "cannot create a temporary file: " + ec.message();
    return false;
  }
  std::vector<llvm::StringRef> argv = {compiler, "-E", "-x", language, "-v"};
  for (const std::string& f : flags) argv.push_back(f);
  argv.push_back("-");
  std::optional<llvm::StringRef> redirects[] = {llvm::StringRef("/dev/null"), llvm::StringRef("/dev/null"),
                                                llvm::StringRef(log)};
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(compiler, argv, std::nullopt, redirects, /*SecondsToWait=*/60,
                                     /*MemoryLimit=*/0, &error);
  auto text = llvm::MemoryBuffer::getFile(log);
  llvm::sys::fs::remove(log);
  if (rc != 0 || !text) {
    why = error.empty() ? "it exited with " + std::to_string(rc) : error;
    if (text) {
      llvm::StringRef first = (*text)->getBuffer().trim();
      if (!first.empty()) why += ": " + first.split('\n').first.str();
    }
    return false;
  }
  llvm::StringRef output = (*text)->getBuffer();
  isGcc = output.contains("gcc version ");
  bool inList = false, sawList = false;
  while (!output.empty()) {
    auto [line, rest] = output.split('\n');
    output = rest;
    line = line.rtrim("\r");
    if (line.starts_with("#include <...> search starts here:")) {
      inList = sawList = true;
      continue;
    }
    if (!inList) continue;
    if (line.starts_with("End of search list.")) break;
    llvm::StringRef dir = line.trim();
    if (dir.ends_with(" (framework directory)")) dir = dir.drop_back(strlen(" (framework directory)"));
    if (!dir.empty() && llvm::sys::fs::is_directory(dir)) dirs.push_back(realPathOr(dir.str()));
  }
  if (!sawList) {
    why = "its output has no include search list";
    return false;
  }
  return true;
}

// The folders Clang's driver searches for the same command, as the parse
// will run it (the compiler's name is argv[0] there too).
std::set<std::string> clangDirs(const std::string& argv0, const std::string& language,
                                const std::vector<std::string>& flags, const std::string& resourceDir) {
  std::vector<std::string> args = {argv0, "-x", language};
  if (!resourceDir.empty()) args.push_back("-resource-dir=" + resourceDir);
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"-fsyntax-only", "-"});
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  clang::CreateInvocationOptions options;
  options.Diags = clang::CompilerInstance::createDiagnostics(new clang::DiagnosticOptions(),
                                                             new clang::IgnoringDiagConsumer(), true);
  options.RecoverOnError = true;
  std::set<std::string> dirs;
  std::unique_ptr<clang::CompilerInvocation> invocation = clang::createInvocation(argv, options);
  if (!invocation) return dirs;
  for (const auto& entry : invocation->getHeaderSearchOpts().UserEntries) dirs.insert(realPathOr(entry.Path));
  return dirs;
}

class DriverIncludesDatabase : public clang::tooling::CompilationDatabase {
 public:
  DriverIncludesDatabase(std::unique_ptr<clang::tooling::CompilationDatabase> inner, DriverQueryOptions options)
      : inner_(std::move(inner)), options_(std::move(options)) {}

  std::vector<clang::tooling::CompileCommand> getCompileCommands(llvm::StringRef file) const override {
    return adjusted(inner_->getCompileCommands(file));
  }
  std::vector<std::string> getAllFiles() const override { return inner_->getAllFiles(); }
  std::vector<clang::tooling::CompileCommand> getAllCompileCommands() const override {
    return adjusted(inner_->getAllCompileCommands());
  }

 private:
  std::vector<clang::tooling::CompileCommand> adjusted(std::vector<clang::tooling::CompileCommand> commands) const {
    for (clang::tooling::CompileCommand& command : commands) {
      std::vector<std::string> dirs = foldersFor(command);
      // Right after the compiler: before any `--`, and before the command's
      // own -idirafter folders, as GCC orders them.
      std::vector<std::string> extra;
      for (const std::string& d : dirs) extra.insert(extra.end(), {"-idirafter", d});
      if (!extra.empty() && !command.CommandLine.empty())
        command.CommandLine.insert(command.CommandLine.begin() + 1, extra.begin(), extra.end());
    }
    return commands;
  }

  std::vector<std::string> foldersFor(const clang::tooling::CompileCommand& command) const {
    if (command.CommandLine.empty()) return {};
    std::string compiler = compilerPath(command);
    std::string resolved = realPathOr(compiler);
    if (!looksLikeGcc(compiler) && !looksLikeGcc(resolved)) return {};
    if (looksLikeGcc(compiler) && llvm::StringRef(llvm::sys::path::filename(resolved)).contains("clang"))
      return {};  // c++ is clang++ on this machine
    std::lock_guard<std::mutex> lock(cacheLock);
    auto note = [&](std::string hint, bool warn) {
      hints[compiler] = hint;
      if ((warn || options_.verbose) && warned.insert(compiler).second)
        llvm::errs() << "fabricize: " << (warn ? "warning: " : "") << hint << "\n";
      return std::vector<std::string>();
    };
    if (!options_.enabled)
      return note(compiler +
                      " is GCC, and fabricize did not ask it for its own include folders "
                      "(--no-query-driver): headers only GCC has are not found; run without "
                      "--no-query-driver",
                  false);
    if (!isTrusted(compiler, resolved, options_.globs)) {
      std::string dirs;
      for (const std::string& d : trustedCompilerDirs()) dirs += (dirs.empty() ? "" : ", ") + d;
      return note(compiler + " is GCC outside the folders fabricize runs compilers from (" + dirs +
                      "), so it was not asked for its own include folders: allow it with --query-driver='" + compiler +
                      "' (a comma list of globs)",
                  false);
    }
    if (!llvm::sys::fs::is_regular_file(resolved) || !llvm::sys::fs::can_execute(resolved))
      return note(compiler + " (the compiler of the compile command for " + command.Filename +
                      ") does not exist or is not executable: its include folders are unknown; fix "
                      "the compile command (re-run CMake) so it names the compiler that built it",
                  true);

    std::string language = llvm::sys::path::extension(command.Filename) == ".c" ? "c" : "c++";
    std::vector<std::string> gccFlags, clangFlags;
    languageFlags(command.CommandLine, gccFlags, clangFlags, language);
    std::string key = compiler + '\0' + language;
    for (const auto* list : {&gccFlags, &clangFlags})
      for (const std::string& f : *list) key += '\0' + f;
    key += '\1';
    auto known = cache.find(key);
    if (known == cache.end()) {
      DriverInfo info;
      std::vector<std::string> gccDirs;
      bool isGcc = false;
      std::string why;
      if (!askGcc(compiler, language, gccFlags, gccDirs, isGcc, why)) {
        info.hint = "asking " + compiler + " for its include folders failed (" + why + "): parsing without them";
        info.warn = true;
      } else if (isGcc) {
        std::set<std::string> own = clangDirs(command.CommandLine.front(), language, clangFlags, options_.resourceDir);
        for (const std::string& d : gccDirs)
          if (!own.count(d)) info.added.push_back(d);
        if (options_.verbose) {
          llvm::errs() << "fabricize: " << compiler << ": its include folders Clang lacks:";
          for (const std::string& d : info.added) llvm::errs() << " " << d;
          llvm::errs() << (info.added.empty() ? " none\n" : "\n");
        }
        // GCC's omp.h uses attributes Clang does not know; Clang needs its own.
        llvm::SmallString<256> clangOmp(options_.resourceDir);
        llvm::sys::path::append(clangOmp, "include", "omp.h");
        for (const std::string& d : info.added)
          if (llvm::sys::fs::exists(d + "/omp.h") && !llvm::sys::fs::exists(clangOmp))
            info.hint = "if the errors are in " + d +
                        "/omp.h: that is GCC's, which Clang cannot parse, "
                        "and Clang has none of its own (" +
                        std::string(clangOmp) +
                        "): install Clang's "
                        "OpenMP headers (Debian: libomp-19-dev; scripts/setup.sh installs it)";
      }
      known = cache.emplace(key, std::move(info)).first;
      if (known->second.warn && warned.insert(compiler).second)
        llvm::errs() << "fabricize: warning: " << known->second.hint << "\n";
    }
    if (known->second.hint.empty())
      hints.erase(compiler);
    else
      hints[compiler] = known->second.hint;
    return known->second.added;
  }

  std::unique_ptr<clang::tooling::CompilationDatabase> inner_;
  DriverQueryOptions options_;
};

}  // namespace

const std::vector<std::string>& trustedCompilerDirs() {
  static const std::vector<std::string> dirs = {"/usr/bin", "/bin", "/usr/local/bin", "/usr/lib/ccache"};
  return dirs;
}

bool parseQueryDriverGlobs(const std::string& value, std::vector<std::string>& out, std::string& error) {
  llvm::SmallVector<llvm::StringRef, 4> parts;
  llvm::StringRef(value).split(parts, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef part : parts) {
    part = part.trim();
    if (part.empty()) continue;
    llvm::Expected<llvm::GlobPattern> pattern = llvm::GlobPattern::create(part);
    if (!pattern) {
      error = "--query-driver: '" + part.str() + "' is not a glob: " + llvm::toString(pattern.takeError());
      return false;
    }
    out.push_back(part.str());
  }
  return true;
}

std::unique_ptr<clang::tooling::CompilationDatabase> withDriverIncludes(
    std::unique_ptr<clang::tooling::CompilationDatabase> inner, const DriverQueryOptions& options) {
  if (!inner) return inner;
  return std::make_unique<DriverIncludesDatabase>(std::move(inner), options);
}

std::string driverIncludesHint(const clang::tooling::CompileCommand& command) {
  std::lock_guard<std::mutex> lock(cacheLock);
  auto hint = hints.find(compilerPath(command));
  return hint == hints.end() ? std::string() : hint->second;
}

}  // namespace fabricize
