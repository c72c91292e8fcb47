#include "services/CommandLine.h"

#include "inputs/CompileCommands.h"
#include "engine/Pch.h"
#include "edits/RuleSelection.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <thread>

namespace fabricize {

CommandLine::CommandLine(std::string usage, std::string epilogue)
    : usage_(std::move(usage)), epilogue_(std::move(epilogue)) {}

void CommandLine::flag(std::initializer_list<const char*> names, bool& target, std::string help) {
  options_.push_back({{names.begin(), names.end()},
                      "",
                      [&target](const std::string&) {
                        target = true;
                        return std::string();
                      },
                      std::move(help)});
}

void CommandLine::option(std::initializer_list<const char*> names, std::string valueName, std::string& target,
                         std::string help) {
  option(
      names, std::move(valueName),
      [&target](const std::string& value) {
        target = value;
        return std::string();
      },
      std::move(help));
}

void CommandLine::option(std::initializer_list<const char*> names, std::string valueName, Setter set,
                         std::string help) {
  options_.push_back({{names.begin(), names.end()}, std::move(valueName), std::move(set), std::move(help)});
}

void CommandLine::list(std::initializer_list<const char*> names, std::string valueName,
                       std::vector<std::string>& target, std::string help, bool* given) {
  option(
      names, std::move(valueName),
      [&target, given](const std::string& value) {
        if (given) *given = true;
        for (std::string& part : splitList(value)) target.push_back(std::move(part));
        return std::string();
      },
      std::move(help));
}

void CommandLine::repeated(std::initializer_list<const char*> names, std::string valueName,
                           std::vector<std::string>& target, std::string help) {
  option(
      names, std::move(valueName),
      [&target](const std::string& value) {
        target.push_back(value);
        return std::string();
      },
      std::move(help));
}

namespace {

// A non-negative number into `target`, or the message saying what is wrong.
template <class Number>
std::string readNumber(const std::string& name, const std::string& value, Number& target) {
  char* end = nullptr;
  double parsed = std::strtod(value.c_str(), &end);
  if (end == value.c_str() || *end != '\0' || !(parsed >= 0) || parsed > 4e9)
    return name + " takes a non-negative number, got '" + value + "'";
  target = static_cast<Number>(parsed);
  return "";
}

}  // namespace

template <class Number>
void CommandLine::number(std::initializer_list<const char*> names, std::string valueName, Number& target,
                         std::string help) {
  std::string name = *names.begin();
  option(
      names, std::move(valueName),
      [&target, name](const std::string& value) { return readNumber(name, value, target); }, std::move(help));
}
template void CommandLine::number(std::initializer_list<const char*>, std::string, double&, std::string);
template void CommandLine::number(std::initializer_list<const char*>, std::string, unsigned&, std::string);

void CommandLine::positionals(std::vector<std::string>& target) { positionals_ = &target; }

void CommandLine::afterDashDash(std::vector<std::string>& target, bool& given) {
  afterDashDash_ = &target;
  sawDashDash_ = &given;
}

void CommandLine::hideLast() { options_.back().hidden = true; }

void CommandLine::ignore(const char* name) { ignored_.push_back(name); }

const CommandLine::Option* CommandLine::find(const std::string& name) const {
  for (const Option& option : options_)
    if (std::find(option.names.begin(), option.names.end(), name) != option.names.end()) return &option;
  return nullptr;
}

CommandLine::Outcome CommandLine::parse(int argc, const char** argv, std::string& error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--" && afterDashDash_) {
      *sawDashDash_ = true;
      afterDashDash_->insert(afterDashDash_->end(), argv + i + 1, argv + argc);
      return Outcome::Run;
    }
    if (arg == "-h" || arg == "--help") {
      std::fputs(help().c_str(), stdout);
      return Outcome::HelpShown;
    }
    if (std::find(ignored_.begin(), ignored_.end(), arg) != ignored_.end()) continue;
    if (arg.size() < 2 || arg[0] != '-') {
      if (!positionals_) {
        error = "unexpected argument '" + arg + "' (see --help)";
        return Outcome::Error;
      }
      positionals_->push_back(arg);
      continue;
    }
    size_t equals = arg.find('=');
    std::string name = arg.substr(0, equals);
    const Option* option = find(name);
    if (!option) {
      error = "unknown option '" + arg + "' (see --help)";
      return Outcome::Error;
    }
    std::string value;
    if (option->valueName.empty()) {
      if (equals != std::string::npos) {
        error = "option '" + name + "' takes no value";
        return Outcome::Error;
      }
    } else if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      error = "option '" + name + "' needs a value (" + name + " <" + option->valueName + ">)";
      return Outcome::Error;
    }
    error = option->set(value);
    if (!error.empty()) return Outcome::Error;
  }
  return Outcome::Run;
}

std::optional<int> CommandLine::parseOrFinish(int argc, const char** argv, int helpExitCode,
                                              const std::function<int(const std::string&)>& fail) {
  std::string error;
  switch (parse(argc, argv, error)) {
    case Outcome::HelpShown:
      return helpExitCode;
    case Outcome::Error:
      return fail(error);
    case Outcome::Run:
      break;
  }
  return std::nullopt;
}

std::string CommandLine::help() const {
  std::string text = usage_;
  if (!text.empty() && text.back() != '\n') text += '\n';
  text += "options:\n";
  std::vector<std::pair<std::string, std::string>> rows;
  size_t width = 0;
  for (const Option& option : options_) {
    if (option.hidden) continue;
    std::string spelled;
    for (const std::string& name : option.names) spelled += (spelled.empty() ? "" : ", ") + name;
    if (!option.valueName.empty()) spelled += " <" + option.valueName + ">";
    width = std::max(width, spelled.size());
    rows.push_back({spelled, option.help});
  }
  width = std::min<size_t>(width, 28);
  // Help words wrapped at 100 columns, continued under the first.
  const size_t indent = width + 4, limit = 100;
  for (const auto& [spelled, help] : rows) {
    std::string row = "  " + spelled;
    row += spelled.size() < width ? std::string(width - spelled.size(), ' ') : std::string();
    row += " ";
    size_t lineStart = 0;
    std::istringstream words(help);
    for (std::string word; words >> word;) {
      if (row.size() - lineStart + 1 + word.size() > limit && row.size() - lineStart > indent) {
        row += "\n" + std::string(indent - 1, ' ');
        lineStart = row.size() - indent + 1;
      }
      row += " " + word;
    }
    text += row + "\n";
  }
  if (afterDashDash_)
    text += "  -- <flags>" + std::string(width > 10 ? width - 10 : 0, ' ') +
            "  compiler flags for every source (instead of a compile_commands.json)\n";
  text += epilogue_;
  return text;
}

void addCommonFlags(CommandLine& line, CommonFlags& flags, unsigned which, const CommonFlagHelp& help) {
  auto words = [](const std::string& given, const char* common) { return given.empty() ? common : given; };
  if (which & kBuildPathFlag)
    line.option({"-p"}, "dir", flags.buildPath,
                words(help.buildPath,
                      "build folder holding compile_commands.json; it also gives the project "
                      "root (the CMake source folder its CMakeCache.txt names, else the "
                      "database's common folder)"));
  if (which & kRootFlag)
    line.option({"--root"}, "dir", flags.root,
                words(help.root,
                      "project root (default: from -p, else the inputs' common folder); nothing "
                      "outside it is edited or written"));
  if (which & kPchCacheFlag)
    line.option({"--pch-cache"}, "dir", flags.pchCache,
                "where precompiled LibTorch headers are cached (default: $FABRICIZE_CACHE_DIR or "
                "~/.cache/fabricize)");
  if (which & kPchFlags) {
    line.flag({"--no-pch"}, flags.noPch, "parse without the cached precompiled LibTorch header");
    line.option({"--pch-cache-size"}, "MiB", flags.pchCacheSize,
                "PCH cache limit (default: $FABRICIZE_PCH_CACHE_MB, else 2048); past it the least recently "
                "used PCHs are evicted");
  }
  if (which & kQueryDriverFlags) {
    line.option({"--query-driver"}, "globs", flags.queryDriver,
                "compilers outside /usr/bin, /bin, /usr/local/bin and /usr/lib/ccache that may be run to ask "
                "for their include folders, as clangd's option (comma list of globs)");
    line.flag({"--no-query-driver"}, flags.noQueryDriver,
              "never run a compile command's compiler to ask for its include folders");
  }
  if (which & kJobsFlag)
    line.option({"-j"}, "N", flags.jobs,
                words(help.jobs, "translation units parsed at once (default: the machine's cores)"));
  if (which & kVerboseFlag)
    line.flag({"--verbose", "-v"}, flags.verbose, words(help.verbose, "say what is being done"));
  if (which & kCompilerFlags) {
    line.repeated(
        {"--extra-arg"}, "flag", flags.extraArgs,
        "a flag added to every compile command, after its own (repeatable), as clang-tidy's option: for code the "
        "project's compiler accepts and Clang needs told (-fbracket-depth=N, -D..., -std=...)");
    line.afterDashDash(flags.compilerFlags, flags.sawDashDash);
  }
}

bool resolveCommonFlags(const CommonFlags& flags, CommonSettings& settings, std::string& error) {
  settings.jobs = std::max(1u, std::thread::hardware_concurrency());
  if (!flags.jobs.empty()) {
    // At most 4 digits: std::stoul would throw on a number past its range.
    if (flags.jobs.size() > 4 || flags.jobs.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(flags.jobs) == 0) {
      error = "-j takes a positive number (1-9999), got '" + flags.jobs + "'";
      return false;
    }
    settings.jobs = static_cast<unsigned>(std::stoul(flags.jobs));
  }
  settings.pchCacheMiB = kDefaultPchCacheMiB;
  if (!pchCacheLimitMiB(flags.pchCacheSize, settings.pchCacheMiB, error)) return false;
  settings.query = defaultDriverQuery();
  settings.query.enabled = !flags.noQueryDriver;
  settings.query.verbose = flags.verbose;
  if (!flags.queryDriver.empty() && !parseQueryDriverGlobs(flags.queryDriver, settings.query.globs, error))
    return false;
  return true;
}

}  // namespace fabricize
