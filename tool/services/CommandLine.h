// The command lines of the subcommands: each declares its options on a
// CommandLine, and the flags several subcommands share (-p, --root, the
// PCH cache, --query-driver, -j, --verbose, flags after `--`) are declared
// once, here (addCommonFlags), and checked once (resolveCommonFlags).
#pragma once

#include "inputs/QueryDriver.h"

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fabricize {

// A subcommand's options: declared with their help, parsed in one pass.
// `--name value` and `--name=value` alike; `-h`/`--help` prints the help.
class CommandLine {
 public:
  // `usage`: the help's first lines; `epilogue`: its last (exit codes).
  explicit CommandLine(std::string usage, std::string epilogue = "");

  // Takes the option's value; returns what is wrong with it, or "".
  using Setter = std::function<std::string(const std::string& value)>;

  void flag(std::initializer_list<const char*> names, bool& target, std::string help);
  void option(std::initializer_list<const char*> names, std::string valueName, std::string& target, std::string help);
  void option(std::initializer_list<const char*> names, std::string valueName, Setter set, std::string help);
  // Given more than once, the values add up; a comma list gives several.
  void list(std::initializer_list<const char*> names, std::string valueName, std::vector<std::string>& target,
            std::string help, bool* given = nullptr);
  // Given more than once, each value is one more, whole (never split at
  // commas: -Wl,... is one compiler flag).
  void repeated(std::initializer_list<const char*> names, std::string valueName, std::vector<std::string>& target,
                std::string help);
  // A non-negative number (verify's tolerances and counts): double or unsigned.
  template <class Number>
  void number(std::initializer_list<const char*> names, std::string valueName, Number& target, std::string help);
  // Words that are not options.
  void positionals(std::vector<std::string>& target);
  // Everything after `--` (compiler flags); `given` says whether `--` was.
  void afterDashDash(std::vector<std::string>& target, bool& given);
  // Parsed, never shown in the help.
  void hideLast();
  // A word accepted and ignored (editors pass `--stdio` to a language server).
  void ignore(const char* name);

  enum class Outcome { Run, HelpShown, Error };
  // On Error, `error` says what was wrong (the caller prints it).
  Outcome parse(int argc, const char** argv, std::string& error);
  // parse(), and what the subcommand returns when it ends there: after the
  // help, `helpExitCode`; on an error, what `fail(error)` returns.
  // Nothing: go on.
  std::optional<int> parseOrFinish(int argc, const char** argv, int helpExitCode,
                                   const std::function<int(const std::string&)>& fail);
  std::string help() const;

 private:
  struct Option {
    std::vector<std::string> names;
    std::string valueName;  // empty: a flag
    Setter set;
    std::string help;
    bool hidden = false;
  };
  const Option* find(const std::string& name) const;

  std::string usage_, epilogue_;
  std::vector<Option> options_;
  std::vector<std::string> ignored_;
  std::vector<std::string>* positionals_ = nullptr;
  std::vector<std::string>* afterDashDash_ = nullptr;
  bool* sawDashDash_ = nullptr;
};

// The flags the analysing subcommands share, as given.
struct CommonFlags {
  std::string buildPath;     // -p: the build folder holding compile_commands.json
  std::string root;          // --root
  bool noPch = false;        // --no-pch
  std::string pchCache;      // --pch-cache: where the LibTorch PCHs are cached
  std::string pchCacheSize;  // --pch-cache-size (MiB)
  std::string jobs;          // -j
  std::string queryDriver;   // --query-driver (globs)
  bool noQueryDriver = false;
  bool verbose = false;                    // --verbose
  std::vector<std::string> compilerFlags;  // after `--`
  std::vector<std::string> extraArgs;      // --extra-arg: added to every compile command
  bool sawDashDash = false;
};

// Which of the common flags a subcommand takes.
enum CommonFlag : unsigned {
  kBuildPathFlag = 1u << 0,
  kRootFlag = 1u << 1,
  kPchFlags = 1u << 2,      // --no-pch, --pch-cache-size
  kPchCacheFlag = 1u << 3,  // --pch-cache
  kJobsFlag = 1u << 4,
  kQueryDriverFlags = 1u << 5,
  kVerboseFlag = 1u << 6,
  kCompilerFlags = 1u << 7,
};
// `buildPathHelp`/`rootHelp`/`jobsHelp`/`verboseHelp`: the subcommand's
// words for what the flag does there (empty: the common words).
struct CommonFlagHelp {
  std::string buildPath, root, jobs, verbose;
};
void addCommonFlags(CommandLine& line, CommonFlags& flags, unsigned which, const CommonFlagHelp& help = {});

// The common flags checked and turned into settings.
struct CommonSettings {
  unsigned jobs = 1;         // -j, else the machine's cores
  uint64_t pchCacheMiB = 0;  // --pch-cache-size, else $FABRICIZE_PCH_CACHE_MB, else the default
  DriverQueryOptions query;  // --query-driver, --no-query-driver, --verbose
};
// False with `error` set when a flag's value is wrong.
bool resolveCommonFlags(const CommonFlags& flags, CommonSettings& settings, std::string& error);

}  // namespace fabricize
