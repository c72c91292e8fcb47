// fabricize verify: proves a migration by running both programs.
//
//   fabricize verify <source.cpp> [options] [-- <compiler flags>]
//   fabricize verify -p <build dir> [--target NAME] [options]
//
// In a scratch folder (--work) it writes two programs with fabricize itself:
// the original instrumented (`--instrument-for-verify`: a fixed seed first in
// main, a record at each backward and optimizer step, see
// runtime/include/fabric/verify.h) and the migration (or the migrated tree
// given with --migrated, a migration made or edited by hand), builds both
// against the Fabric package, runs the original, the migration on 1 process
// and on 2, and compares (VerifyChecks below). Exit codes: 0 equivalent,
// 1 differences found, 2 could not build or run.
#include "VerifyCommand.h"

#include "Output.h"
#include "Project.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

extern char** environ;

namespace fabricize {

namespace {

constexpr int kEquivalent = 0, kDifferences = 1, kCannot = 2;

struct VerifyOptions {
  std::vector<std::string> sources;
  std::string buildPath, target, migrated, work, report, fabricDir, accelerator;
  std::vector<std::string> programArgs, compilerFlags;
  bool sawDashDash = false;
  unsigned steps = 40, timeout = 300;
  double lossTolerance = 0.5, metricTolerance = 0.35, accuracyTolerance = 0.05;
};

const char* kUsage =
    "usage: fabricize verify <source.cpp>... [options] [-- <compiler flags>]\n"
    "       fabricize verify -p <build dir> [--target NAME] [options]\n"
    "options:\n"
    "  --args \"<arguments>\"   the program's arguments (split at spaces)\n"
    "  --steps N              optimizer steps each run makes (default 40)\n"
    "  --migrated <dir>       verify this migrated tree (a CMake project) instead of migrating\n"
    "  --work <dir>           scratch folder (default: a new folder under the temp folder)\n"
    "  --report <file.json>   the verdicts as JSON, and a Markdown summary beside it (.md)\n"
    "  --timeout S            seconds each run may take (default 300)\n"
    "  --accelerator cpu|cuda the device both programs run on (LT_ACCELERATOR; default: theirs)\n"
    "  --fabric-dir <dir>     the Fabric CMake package (default: the one beside fabricize)\n"
    "  --loss-tolerance R     relative band of the 2-rank loss around the original's (0.5)\n"
    "  --metric-tolerance R   relative difference of losses printed (0.35)\n"
    "  --accuracy-tolerance A difference of accuracies printed (0.05, at least 10% of the value)\n";

int cannot(const std::string& message) {
  llvm::errs() << "fabricize verify: error: " << message << "\n";
  return kCannot;
}

std::vector<std::string> splitWords(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

bool parseOptions(int argc, const char** argv, VerifyOptions& o, std::string& error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (o.sawDashDash) {
      o.compilerFlags.push_back(arg);
      continue;
    }
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) {
        error = arg + " needs a value";
        return false;
      }
      out = argv[++i];
      return true;
    };
    auto number = [&](auto& out) {
      std::string text;
      if (!value(text)) return false;
      char* end = nullptr;
      double parsed = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || parsed < 0) {
        error = arg + " takes a non-negative number, got '" + text + "'";
        return false;
      }
      out = static_cast<std::remove_reference_t<decltype(out)>>(parsed);
      return true;
    };
    std::string text;
    if (arg == "--") o.sawDashDash = true;
    else if (arg == "-p") { if (!value(o.buildPath)) return false; }
    else if (arg == "--target") { if (!value(o.target)) return false; }
    else if (arg == "--args") { if (!value(text)) return false; o.programArgs = splitWords(text); }
    else if (arg == "--migrated") { if (!value(o.migrated)) return false; }
    else if (arg == "--work") { if (!value(o.work)) return false; }
    else if (arg == "--report") { if (!value(o.report)) return false; }
    else if (arg == "--fabric-dir") { if (!value(o.fabricDir)) return false; }
    else if (arg == "--accelerator") { if (!value(o.accelerator)) return false; }
    else if (arg == "--steps") { if (!number(o.steps)) return false; }
    else if (arg == "--timeout") { if (!number(o.timeout)) return false; }
    else if (arg == "--loss-tolerance") { if (!number(o.lossTolerance)) return false; }
    else if (arg == "--metric-tolerance") { if (!number(o.metricTolerance)) return false; }
    else if (arg == "--accuracy-tolerance") { if (!number(o.accuracyTolerance)) return false; }
    else if (arg == "-h" || arg == "--help") { llvm::outs() << kUsage; std::exit(0); }
    else if (!arg.empty() && arg[0] == '-') { error = "unknown option " + arg + "\n" + kUsage; return false; }
    else o.sources.push_back(arg);
  }
  if (o.sources.empty() == o.buildPath.empty()) {
    error = "give either source files or -p <build dir>\n" + std::string(kUsage);
    return false;
  }
  if (o.steps == 0) {
    error = "--steps must be at least 1";
    return false;
  }
  return true;
}

// --- processes ---------------------------------------------------------------

struct Run {
  int exitCode = 0;
  bool timedOut = false;
  double seconds = 0;
  std::string out, err;
};

// The whole file, or "" when it cannot be read (a record a run never wrote).
std::string contentsOf(const std::string& path) {
  std::string text;
  return readFile(path, text) ? text : std::string();
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string tail(const std::string& text, size_t count) {
  auto all = lines(text);
  std::string out;
  for (size_t i = all.size() > count ? all.size() - count : 0; i < all.size(); ++i) out += all[i] + "\n";
  return out;
}

// Runs `command` in `cwd` with `extraEnvironment` over this process's,
// stdout and stderr to files. Folders it needs are made.
Run execute(const std::vector<std::string>& command, const std::string& cwd,
            const std::map<std::string, std::string>& extraEnvironment, const std::string& logStem,
            unsigned timeout) {
  Run run;
  llvm::sys::fs::create_directories(cwd);
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text = *entry;
    std::string key = text.substr(0, text.find('='));
    if (!extraEnvironment.count(key)) environment.push_back(text);
  }
  for (const auto& [key, value] : extraEnvironment) environment.push_back(key + "=" + value);
  // ExecuteAndWait has no working folder: a shell changes to it and execs.
  std::vector<std::string> argv{"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", cwd};
  argv.insert(argv.end(), command.begin(), command.end());
  std::vector<llvm::StringRef> argRefs(argv.begin(), argv.end());
  std::vector<llvm::StringRef> envRefs(environment.begin(), environment.end());
  const std::string outPath = logStem + ".stdout", errPath = logStem + ".stderr";
  std::optional<llvm::StringRef> redirects[] = {llvm::StringRef("/dev/null"), llvm::StringRef(outPath),
                                                llvm::StringRef(errPath)};
  std::string message;
  auto start = std::chrono::steady_clock::now();
  run.exitCode = llvm::sys::ExecuteAndWait("/bin/sh", argRefs, envRefs, redirects, timeout, 0, &message);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // ExecuteAndWait returns -2 after killing a child that ran past the limit.
  run.timedOut = run.exitCode == -2 && message.find("timed out") != std::string::npos;
  run.out = contentsOf(outPath);
  run.err = contentsOf(errPath);
  if (!message.empty() && !run.timedOut) run.err += "\n" + message;
  return run;
}

// --- records (runtime/include/fabric/verify.h) --------------------------------

struct Record {
  bool present = false;
  long pid = 0;
  int rank = 0;
  std::vector<std::string> lossText;  // %a: exact
  std::vector<double> losses;
  std::vector<std::string> steps;  // parameter hashes
  std::vector<long long> offsets;  // stdout's size at each step
  std::string end;
};

Record readRecord(const std::string& path) {
  Record r;
  std::ifstream in(path);
  if (!in) return r;
  r.present = true;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string kind, a, b, c;
    words >> kind >> a >> b >> c;
    if (kind == "process") {
      r.pid = std::atol(a.c_str());
      r.rank = std::atoi(c.c_str());
    } else if (kind == "loss") {
      r.lossText.push_back(b);
      r.losses.push_back(std::strtod(c.c_str(), nullptr));
    } else if (kind == "step") {
      r.steps.push_back(b);
      r.offsets.push_back(std::atoll(c.c_str()));
    } else if (kind == "end") {
      r.end = a;
    }
  }
  return r;
}

// --- checks -------------------------------------------------------------------

struct Check {
  std::string id, title;
  std::string verdict = "pass";  // pass, fail, not run
  std::vector<std::string> details;
  std::vector<std::string> where;  // file:line of the construct most likely responsible
};

const std::string kNumber = R"([-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)";

std::string shapeOf(const std::string& line) {
  static const std::regex number(kNumber);
  return std::regex_replace(line, number, "#");
}

struct Metric {
  std::string word;
  double value;
};

std::vector<Metric> metricsOf(const std::string& line) {
  static const std::regex metric(R"(\b([A-Za-z_]*(?:loss|acc)[A-Za-z_]*)\s*[:=]?\s*()" + kNumber + ")",
                                 std::regex::icase);
  std::vector<Metric> out;
  for (std::sregex_iterator it(line.begin(), line.end(), metric), end; it != end; ++it)
    out.push_back({(*it)[1].str(), std::strtod((*it)[2].str().c_str(), nullptr)});
  return out;
}

// A console line with a metric, placed by the optimizer steps made before
// it was printed (the step records note the console's size).
struct Printed {
  std::string shape, line;
  size_t index = 0;  // among the lines of its shape: the epoch, for epoch lines
  double steps = 0;
  std::vector<Metric> metrics;
};

std::map<std::string, std::vector<Printed>> printedMetrics(const std::string& console,
                                                           const std::vector<long long>& offsets) {
  std::map<std::string, std::vector<Printed>> out;
  size_t at = 0;
  for (const std::string& line : lines(console)) {
    const long long begin = static_cast<long long>(at);
    at += line.size() + 1;
    auto metrics = metricsOf(line);
    if (metrics.empty()) continue;
    Printed p;
    p.shape = shapeOf(line);
    p.line = line;
    p.metrics = std::move(metrics);
    // The steps made before the line was complete: `cout << "loss " << train_epoch()`
    // writes its start before the epoch's steps run.
    const long long end = begin + static_cast<long long>(line.size());
    p.steps = static_cast<double>(std::upper_bound(offsets.begin(), offsets.end(), end) - offsets.begin());
    auto& group = out[p.shape];
    p.index = group.size();
    group.push_back(std::move(p));
  }
  return out;
}

// The original's values a 2-rank line may be compared with: the line of the
// same shape and index (same epoch: the same data seen) and the value
// interpolated at as many optimizer steps (the same number of updates), when
// the original printed that far. 2 ranks make half the steps per epoch, so a
// correct migration lands between the two, and a metric that lost its
// meaning (off by the number of ranks) lands outside both. Both are needed:
// either alone is biased while the metric still moves fast (an epoch's mean
// over half the steps), so a line without both is not compared.
std::vector<double> referencesFor(const Printed& p, size_t metric, const std::vector<Printed>& original) {
  std::vector<double> refs;
  if (p.index >= original.size() || original[p.index].metrics.size() <= metric) return refs;
  refs.push_back(original[p.index].metrics[metric].value);
  std::vector<std::pair<double, double>> curve;
  for (const Printed& o : original)
    if (o.metrics.size() > metric) curve.push_back({o.steps, o.metrics[metric].value});
  for (size_t i = 0; i < curve.size(); ++i) {
    if (curve[i].first == p.steps) {
      refs.push_back(curve[i].second);
    } else if (i > 0 && curve[i - 1].first < p.steps && p.steps < curve[i].first) {
      auto [t0, v0] = curve[i - 1];
      auto [t1, v1] = curve[i];
      refs.push_back(v0 + (v1 - v0) * (p.steps - t0) / (t1 - t0));
    }
  }
  if (refs.size() < 2) refs.clear();
  return refs;
}

struct SourceLine {
  std::string file;  // relative to the migrated tree
  unsigned line;
  std::string text;
};

std::vector<SourceLine> sourceLines(const std::string& tree) {
  std::vector<SourceLine> out;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(tree, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef path = it->path();
    // Build folders inside the tree hold generated code, not the program's.
    llvm::StringRef relative = path.substr(tree.size() + 1);
    if (relative.starts_with("build") || relative.contains("/build") || relative.contains("CMakeFiles")) {
      if (it->type() == llvm::sys::fs::file_type::directory_file) it.no_push();
      continue;
    }
    llvm::StringRef ext = llvm::sys::path::extension(path);
    if (ext != ".cpp" && ext != ".cc" && ext != ".cxx" && ext != ".h" && ext != ".hpp") continue;
    auto text = lines(contentsOf(path.str()));
    for (size_t i = 0; i < text.size(); ++i)
      out.push_back({relative.str(), static_cast<unsigned>(i + 1), text[i]});
  }
  return out;
}

// Lines of the migrated sources matching `pattern` (at most 3), as
// "file:line: text".
std::vector<std::string> linesMatching(const std::vector<SourceLine>& source, const std::regex& pattern) {
  std::vector<std::string> out;
  for (const SourceLine& s : source) {
    if (out.size() == 3) break;
    if (std::regex_search(s.text, pattern)) {
      std::string text = s.text.substr(s.text.find_first_not_of(" \t") == std::string::npos
                                           ? 0 : s.text.find_first_not_of(" \t"));
      out.push_back(s.file + ":" + std::to_string(s.line) + ": " + text);
    }
  }
  return out;
}

std::string escapeRegex(const std::string& text) {
  static const std::regex special(R"([.^$|()\[\]{}*+?\\])");
  return std::regex_replace(text, special, R"(\$&)");
}

std::string runStory(const Run& run, const std::vector<Record>& records) {
  std::string steps;
  for (const Record& r : records)
    if (r.present)
      steps += (steps.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r.rank) + " after step " +
               std::to_string(r.steps.size());
  std::string how = run.timedOut ? "did not finish (killed after the time limit: a hang?)"
                                 : "exited with code " + std::to_string(run.exitCode);
  return how + (steps.empty() ? std::string(" before any step") : " (" + steps + ")");
}

// The files each rank opened for writing, from libfabric_verify_files.so's log.
std::map<std::string, std::set<int>> writersByFile(const std::string& log, const std::vector<Record>& records,
                                                   const std::string& ignoredFolder) {
  std::map<long, int> rankOfPid;
  for (const Record& r : records)
    if (r.present) rankOfPid[r.pid] = r.rank;
  std::map<std::string, std::set<int>> out;
  for (const std::string& line : lines(contentsOf(log))) {
    size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    long pid = std::atol(line.substr(0, tab).c_str());
    std::string path = line.substr(tab + 1);
    if (llvm::StringRef(path).starts_with(ignoredFolder) || llvm::StringRef(path).starts_with("/dev/") ||
        llvm::StringRef(path).starts_with("/proc/") || llvm::StringRef(path).starts_with("/sys/"))
      continue;
    auto rank = rankOfPid.find(pid);
    if (rank != rankOfPid.end()) out[path].insert(rank->second);
  }
  return out;
}

std::vector<std::string> filesIn(const std::string& folder) {
  std::vector<std::string> out;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(folder, ec), end; it != end && !ec; it.increment(ec))
    if (it->type() == llvm::sys::fs::file_type::regular_file) out.push_back(it->path().substr(folder.size() + 1));
  std::sort(out.begin(), out.end());
  return out;
}

std::string joined(const std::vector<std::string>& items, const std::string& separator = ", ") {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

std::string ranksText(const std::set<int>& ranks) {
  std::vector<std::string> names;
  for (int r : ranks) names.push_back(std::to_string(r));
  return joined(names);
}

// Makes `to` hold what `from` holds, rewriting only files whose content
// changed (their times tell the build what to recompile); `from` is removed.
std::string syncTree(const std::string& from, const std::string& to) {
  std::set<std::string> wanted;
  for (const std::string& relative : filesIn(from)) {
    wanted.insert(relative);
    std::string text = contentsOf(from + "/" + relative);
    const std::string target = to + "/" + relative;
    if (llvm::sys::fs::exists(target) && contentsOf(target) == text) continue;
    if (std::string problem = writeFileAtomically(target, text); !problem.empty()) return problem;
  }
  if (llvm::sys::fs::exists(to))
    for (const std::string& relative : filesIn(to))
      if (!wanted.count(relative)) llvm::sys::fs::remove(to + "/" + relative);
  llvm::sys::fs::remove_directories(from);
  return "";
}

// --- building -------------------------------------------------------------------

std::vector<std::string> elfExecutables(const std::string& build) {
  std::vector<std::string> found;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(build, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef path = it->path();
    if (path.contains("/CMakeFiles/")) {
      if (it->type() == llvm::sys::fs::file_type::directory_file) it.no_push();
      continue;
    }
    if (it->type() != llvm::sys::fs::file_type::regular_file || llvm::sys::path::filename(path).contains('.'))
      continue;
    if (!llvm::sys::fs::can_execute(path)) continue;
    char head[4] = {};
    std::ifstream(path.str(), std::ios::binary).read(head, sizeof head);
    if (std::string(head, sizeof head) == "\x7f" "ELF") found.push_back(path.str());
  }
  std::sort(found.begin(), found.end());
  return found;
}

// Configures and builds `source` in `build`; empty on success, else what failed.
std::string buildProject(const std::string& source, const std::string& build, const VerifyOptions& o,
                         const std::string& logStem) {
  // One precompiled LibTorch per target (the Fabric package's helper).
  const std::string include = o.fabricDir + "/FabricPrecompileAll.cmake";
  auto cmake = llvm::sys::findProgramByName("cmake");
  if (!cmake) return "cmake was not found on PATH";
  // -O1: LibTorch code compiles in ~60% of -O3's time, and both programs
  // are built alike (equivalence, not speed, is what is measured).
  std::vector<std::string> configure{*cmake, "-S", source, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                                     "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG", "-DCMAKE_PREFIX_PATH=" + o.fabricDir};
  if (llvm::sys::fs::exists(include)) configure.push_back("-DCMAKE_PROJECT_INCLUDE=" + include);
  if (llvm::sys::findProgramByName("ninja")) configure.insert(configure.begin() + 1, {"-G", "Ninja"});
  Run step = execute(configure, o.work, {}, logStem + ".configure", 0);
  if (step.exitCode != 0) return "configuring " + source + " failed:\n" + tail(step.out + step.err, 30);
  step = execute({*cmake, "--build", build}, o.work, {}, logStem + ".build", 0);
  if (step.exitCode != 0) return "building " + source + " failed:\n" + tail(step.out + step.err, 40);
  return "";
}

std::string pickExecutable(const std::string& build, const VerifyOptions& o, std::string& error) {
  std::vector<std::string> found = elfExecutables(build);
  if (!o.target.empty()) {
    for (const std::string& f : found)
      if (llvm::sys::path::filename(f) == o.target) return f;
    error = "no executable named '" + o.target + "' in " + build + " (built: " + joined(found) + ")";
    return "";
  }
  if (found.size() == 1) return found.front();
  error = found.empty() ? "the build of " + build + " made no executable"
                        : "the project builds several executables (" + joined(found) +
                              "): choose one with --target NAME";
  return "";
}

std::string locate(const char* argv0, std::string& fabricizePath) {
  static int anchor;
  fabricizePath = llvm::sys::fs::getMainExecutable(argv0, &anchor);
  llvm::SmallString<256> prefix(llvm::sys::path::parent_path(llvm::sys::path::parent_path(fabricizePath)));
  return std::string(prefix);
}

// --- the report ---------------------------------------------------------------

std::string markdown(const std::vector<Check>& checks, const std::string& subject, int verdict,
                     const nlohmann::json& findings, const std::string& migrationReport) {
  std::string md = "# fabricize verify: " + subject + "\n\n";
  md += verdict == kEquivalent ? "**Equivalent**: every check passed.\n\n"
                               : "**Differences found** (exit 1): see the failed checks.\n\n";
  md += "| check | verdict |\n|---|---|\n";
  for (const Check& c : checks) md += "| " + c.title + " | " + c.verdict + " |\n";
  for (const Check& c : checks) {
    if (c.details.empty() && c.where.empty()) continue;
    md += "\n## " + c.title + " (" + c.verdict + ")\n\n";
    for (const std::string& d : c.details) md += "- " + d + "\n";
    if (!c.where.empty()) {
      md += "\nMost likely responsible:\n\n";
      for (const std::string& w : c.where) md += "- `" + w + "`\n";
    }
  }
  if (!migrationReport.empty())
    md += "\nThe migration report (per file and rule: migrated automatically, needs a person, not "
          "understood): " + migrationReport + "\n";
  if (!findings.empty()) {
    md += "\n## What the migration reported\n\n";
    for (const auto& f : findings)
      md += "- `" + f.value("path", std::string()) + ":" + std::to_string(f.value("line", 0)) + "` [" +
            f.value("rule", std::string()) + "] " + f.value("message", std::string()) + "\n";
  }
  return md;
}

}  // namespace

int runVerify(int argc, const char** argv) {
  VerifyOptions o;
  std::string error;
  if (!parseOptions(argc, argv, o, error)) return cannot(error);

  std::string fabricize;
  const std::string prefix = locate(argv[0], fabricize);
  if (o.fabricDir.empty()) {
    for (const std::string& candidate : {prefix, prefix + "/lib/cmake/Fabric"})
      if (llvm::sys::fs::exists(candidate + "/FabricConfig.cmake")) o.fabricDir = candidate;
    if (o.fabricDir.empty())
      return cannot("no FabricConfig.cmake beside " + fabricize + ": give --fabric-dir <the Fabric package>");
  }
  o.fabricDir = absolutePath(o.fabricDir);
  const std::string preload = prefix + "/lib/libfabric_verify_files.so";
  if (!llvm::sys::fs::exists(preload))
    return cannot(preload + " is missing (it tells which rank writes which file): build the runtime's "
                  "fabric_verify_files target");
  if (o.work.empty()) {
    llvm::SmallString<128> folder;
    if (llvm::sys::fs::createUniqueDirectory("fabricize-verify", folder))
      return cannot("cannot make a scratch folder");
    o.work = std::string(folder);
  }
  o.work = absolutePath(o.work);
  llvm::sys::fs::create_directories(o.work);
  const std::string records = o.work + "/records";
  llvm::sys::fs::remove_directories(records);
  llvm::sys::fs::remove_directories(o.work + "/runs");

  // 1. The two programs, both written by fabricize from the user's sources.
  std::vector<std::string> input;
  if (!o.buildPath.empty()) {
    input = {"--all", "-p", absolutePath(o.buildPath)};
  } else {
    for (const std::string& s : o.sources) input.push_back(absolutePath(s));
    input.push_back("--emit-cmake");
  }
  auto writeTree = [&](const std::string& out, bool instrumented) -> std::string {
    // Written beside, then only changed files copied over: a second verify
    // of the same program rebuilds nothing.
    const std::string fresh = out + ".new";
    llvm::sys::fs::remove_directories(fresh);
    std::vector<std::string> command{fabricize};
    command.insert(command.end(), input.begin(), input.end());
    command.insert(command.end(), {"-o", fresh, "--quiet"});
    if (instrumented) command.push_back("--instrument-for-verify");
    else
      command.insert(command.end(), {"--report", o.work + "/migration.json", "--report", o.work + "/migration.md",
                                     "--report", o.work + "/migration.html"});
    if (o.sawDashDash) {
      command.push_back("--");
      command.insert(command.end(), o.compilerFlags.begin(), o.compilerFlags.end());
    }
    Run run = execute(command, o.work, {},
                      o.work + (instrumented ? "/instrument" : "/migrate"), 0);
    if (run.exitCode != 0 && run.exitCode != 1)
      return std::string(instrumented ? "instrumenting" : "migrating") + " failed:\n" + tail(run.err, 30);
    return syncTree(fresh, out);
  };
  for (const char* stale : {"/migration.json", "/migration.md", "/migration.html"})
    llvm::sys::fs::remove(o.work + stale);
  const std::string originalTree = o.work + "/original";
  std::string migratedTree = o.work + "/migrated";
  llvm::errs() << "fabricize verify: writing the instrumented original and the migration in " << o.work << "\n";
  if (std::string problem = writeTree(originalTree, true); !problem.empty()) return cannot(problem);
  if (o.migrated.empty()) {
    if (std::string problem = writeTree(migratedTree, false); !problem.empty()) return cannot(problem);
  } else {
    migratedTree = absolutePath(o.migrated);
    if (!llvm::sys::fs::exists(migratedTree + "/CMakeLists.txt"))
      return cannot("--migrated " + o.migrated + " has no CMakeLists.txt: give the migrated project's root");
  }
  // A project's tree mirrors the project root; its CMakeLists.txt is where
  // the CMake source directory is under that root (a project folder inside
  // a repository: the root is the repository, `projects/face/` builds).
  std::string projectFolder;
  if (!o.buildPath.empty()) {
    BuildTree build = readBuildTree(o.buildPath);
    std::string text;
    nlohmann::json report;
    if (readFile(o.work + "/migration.json", text)) report = nlohmann::json::parse(text, nullptr, false);
    std::string root = report.is_object() ? report.value("root", std::string()) : std::string();
    if (!root.empty() && !build.cmakeSourceDir.empty() && build.cmakeSourceDir != root &&
        isUnderOrEqual(build.cmakeSourceDir, root))
      projectFolder = "/" + build.cmakeSourceDir.substr(root.size() + 1);
  }
  llvm::errs() << "fabricize verify: building both programs\n";
  std::string binaries[2];
  const std::string trees[2] = {originalTree + projectFolder, migratedTree + projectFolder};
  const char* names[2] = {"original", "migrated"};
  for (int i = 0; i < 2; ++i) {
    // One build folder per tree (a CMake build belongs to one source folder).
    const std::string build = o.work + "/build-" + names[i] +
                              (i == 1 && !o.migrated.empty() ? "-" + std::to_string(std::hash<std::string>()(migratedTree)) : "");
    if (std::string problem = buildProject(trees[i], build, o, o.work + "/" + names[i]); !problem.empty())
      return cannot("the " + std::string(names[i]) + " program: " + problem);
    binaries[i] = pickExecutable(build, o, error);
    if (binaries[i].empty()) return cannot(error);
  }

  // 2. Three runs, each in an empty folder.
  auto runProgram = [&](const std::string& name, const std::string& binary, int ranks) {
    const std::string recordFolder = records + "/" + name;
    llvm::sys::fs::create_directories(recordFolder);
    std::map<std::string, std::string> env{{"FABRIC_VERIFY_RECORD", recordFolder},
                                           {"FABRIC_VERIFY_STEPS", std::to_string(o.steps)},
                                           {"FABRIC_VERIFY_FILES", recordFolder + "/files.log"},
                                           {"LD_PRELOAD", preload}};
    if (ranks > 0) env["LT_DEVICES"] = std::to_string(ranks);
    if (ranks > 1) env["FABRIC_CHECK_SYNC"] = "1";
    if (!o.accelerator.empty()) {
      env["LT_ACCELERATOR"] = o.accelerator;
      if (o.accelerator == "cpu") env["CUDA_VISIBLE_DEVICES"] = "";
    }
    std::vector<std::string> command{binary};
    command.insert(command.end(), o.programArgs.begin(), o.programArgs.end());
    llvm::errs() << "fabricize verify: running " << name << "\n";
    return execute(command, o.work + "/runs/" + name, env, recordFolder + "/console", o.timeout);
  };
  Run original = runProgram("original", binaries[0], 0);
  std::vector<Record> originalRecord{readRecord(records + "/original/rank0.txt")};
  if (original.exitCode != 0 || original.timedOut)
    return cannot("the original program " + runStory(original, originalRecord) + ":\n" + tail(original.err, 20));
  if (!originalRecord[0].present || originalRecord[0].steps.empty())
    return cannot("the original program made no optimizer step that fabricize could record (no "
                  "optimizer.step() in the project's code?)");
  Run one = runProgram("one", binaries[1], 1);
  Run two = runProgram("two", binaries[1], 2);
  std::vector<Record> oneRecord{readRecord(records + "/one/rank0.txt")};
  std::vector<Record> twoRecords;
  for (int rank = 0; rank < 2; ++rank) twoRecords.push_back(readRecord(records + "/two/rank" + std::to_string(rank) + ".txt"));

  nlohmann::json migrationFindings = nlohmann::json::array();
  if (auto text = contentsOf(o.work + "/migration.json"); !text.empty()) {
    auto parsed = nlohmann::json::parse(text, nullptr, false);
    if (!parsed.is_discarded() && parsed.contains("findings")) migrationFindings = parsed["findings"];
  }
  auto findingsOf = [&](const std::string& rule) {
    std::vector<std::string> out;
    for (const auto& f : migrationFindings)
      if (f.value("rule", std::string()) == rule)
        out.push_back(f.value("path", std::string()) + ":" + std::to_string(f.value("line", 0)) + ": [" + rule +
                      "] " + f.value("message", std::string()).substr(0, 160));
    return out;
  };
  const std::vector<SourceLine> migratedSource = sourceLines(migratedTree);
  const Record& reference = originalRecord[0];
  std::vector<Check> checks;

  // 3a. One process: the runtime is transparent.
  {
    Check c{"one-rank-records", "1 rank: losses and parameters identical to the original, bit for bit"};
    const Record& r = oneRecord[0];
    if (one.exitCode != 0 || one.timedOut) {
      c.verdict = "fail";
      c.details.push_back("the migrated program on 1 process " + runStory(one, oneRecord) + ":\n" + tail(one.err, 15));
    } else if (!r.present) {
      c.verdict = "fail";
      c.details.push_back("the migrated program recorded nothing: it never constructed a fabric::Fabric, or "
                          "never called fabric.backward()/fabric.step()");
    } else {
      for (size_t i = 0; i < std::max(r.losses.size(), reference.losses.size()); ++i) {
        if (i >= r.losses.size() || i >= reference.losses.size() || r.lossText[i] != reference.lossText[i]) {
          c.verdict = "fail";
          c.details.push_back(
              i >= r.losses.size() || i >= reference.losses.size()
                  ? "the original made " + std::to_string(reference.losses.size()) + " backward passes, the migration " +
                        std::to_string(r.losses.size())
                  : "loss of backward " + std::to_string(i + 1) + ": original " + reference.lossText[i] + " (" +
                        std::to_string(reference.losses[i]) + "), migrated " + r.lossText[i] + " (" +
                        std::to_string(r.losses[i]) + ")" +
                        (i == 0 ? ": the first loss already differs, so the two programs did not start from "
                                  "the same weights or data (a random number drawn by one of them?)"
                                : ""));
          break;
        }
      }
      for (size_t i = 0; c.verdict == "pass" && i < std::max(r.steps.size(), reference.steps.size()); ++i) {
        if (i >= r.steps.size() || i >= reference.steps.size() || r.steps[i] != reference.steps[i]) {
          c.verdict = "fail";
          c.details.push_back(i >= r.steps.size() || i >= reference.steps.size()
                                  ? "the original made " + std::to_string(reference.steps.size()) +
                                        " optimizer steps, the migration " + std::to_string(r.steps.size())
                                  : "parameters after step " + std::to_string(i + 1) + " differ (hash " +
                                        reference.steps[i] + " vs " + r.steps[i] + ")");
        }
      }
      if (c.verdict == "pass")
        c.details.push_back(std::to_string(r.losses.size()) + " losses and " + std::to_string(r.steps.size()) +
                            " parameter hashes identical");
    }
    checks.push_back(c);
  }
  {
    Check c{"one-rank-console", "1 rank: console output identical to the original"};
    auto a = lines(original.out), b = lines(one.out);
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
      if (i >= a.size() || i >= b.size() || a[i] != b[i]) {
        c.verdict = "fail";
        c.details.push_back("line " + std::to_string(i + 1) + ": original `" + (i < a.size() ? a[i] : "(none)") +
                            "`, migrated `" + (i < b.size() ? b[i] : "(none)") + "`");
        break;
      }
    }
    if (c.verdict == "pass") c.details.push_back(std::to_string(a.size()) + " lines identical");
    checks.push_back(c);
  }
  {
    Check c{"one-rank-files", "1 rank: the same files written as the original"};
    auto a = filesIn(o.work + "/runs/original"), b = filesIn(o.work + "/runs/one");
    if (a != b) {
      c.verdict = "fail";
      c.details.push_back("original wrote [" + joined(a) + "], the migration [" + joined(b) + "]");
    }
    checks.push_back(c);
  }

  // 3b. Two processes: one model, the same training, one writer per file.
  const bool twoRan = two.exitCode == 0 && !two.timedOut && twoRecords[0].present && twoRecords[1].present;
  {
    Check c{"two-ranks-run", "2 ranks: the job runs to the step budget on both ranks"};
    if (!twoRan) {
      c.verdict = "fail";
      c.details.push_back("the migrated program on 2 processes " + runStory(two, twoRecords));
      std::string said;
      for (const std::string& line : lines(two.err))
        if (llvm::StringRef(line).starts_with("fabric")) said += line + "\n";
      if (!said.empty()) c.details.push_back("the runtime said:\n" + tail(said, 8));
      else c.details.push_back("its last output:\n" + tail(two.err, 10));
      c.where = findingsOf("fabric-divergent-exit");
    }
    checks.push_back(c);
  }
  {
    Check c{"two-ranks-parameters", "2 ranks: identical parameters on every rank after every step"};
    const Record &r0 = twoRecords[0], &r1 = twoRecords[1];
    size_t common = std::min(r0.steps.size(), r1.steps.size());
    for (size_t i = 0; i < common; ++i)
      if (r0.steps[i] != r1.steps[i]) {
        c.verdict = "fail";
        c.details.push_back("after step " + std::to_string(i + 1) + " rank 0 and rank 1 hold different parameters: "
                            "the ranks train separate copies (gradients not all-reduced)");
        break;
      }
    std::string sync;
    for (const std::string& line : lines(two.err))
      if (line.find("sync check FAILED") != std::string::npos || line.find("differs between ranks") != std::string::npos ||
          line.find("fabric: warning") != std::string::npos)
        sync += line + "\n";
    if (c.verdict == "fail" || !sync.empty()) {
      if (!sync.empty()) c.details.push_back("the runtime said:\n" + tail(sync, 6));
      if (c.verdict == "pass" && (sync.find("FAILED") != std::string::npos ||
                                  sync.find("differs between ranks") != std::string::npos))
        c.verdict = "fail";
      c.where = linesMatching(migratedSource, std::regex(R"(\.setup\s*\()"));
      if (c.where.empty()) c.where.push_back("no fabric.setup(...) call in the migrated sources");
    }
    if (common == 0 && c.verdict == "pass") {
      c.verdict = "not run";
      c.details.push_back("no step was recorded on both ranks");
    }
    checks.push_back(c);
  }
  {
    Check c{"two-ranks-loss", "2 ranks: loss trajectory within the tolerance band of the original's"};
    const Record &r0 = twoRecords[0], &r1 = twoRecords[1];
    size_t n = std::min({r0.losses.size(), r1.losses.size(), reference.losses.size()});
    if (n == 0) {
      c.verdict = "not run";
      c.details.push_back("no loss recorded on both ranks and in the original");
    } else {
      // Windows of a fifth of the run: single steps are noisy (each rank sees
      // its own shard; the global batch is twice the original's).
      size_t window = std::max<size_t>(1, n / 5);
      double worst = 0;
      for (size_t begin = 0; begin + window <= n; begin += window) {
        double a = 0, b = 0;
        for (size_t i = begin; i < begin + window; ++i) {
          a += reference.losses[i];
          b += (r0.losses[i] + r1.losses[i]) / 2;
        }
        a /= window;
        b /= window;
        double off = std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-12});
        worst = std::max(worst, off);
        if (std::abs(a - b) > o.lossTolerance * std::max(std::abs(a), std::abs(b)) + 0.02 && c.verdict == "pass") {
          c.verdict = "fail";
          c.details.push_back("backward " + std::to_string(begin + 1) + "-" + std::to_string(begin + window) +
                              ": mean loss " + std::to_string(b) + " on 2 ranks, " + std::to_string(a) +
                              " in the original (band " + std::to_string(o.lossTolerance) + ")");
        }
      }
      c.details.push_back("largest relative difference of windowed mean losses: " + std::to_string(worst) +
                          " over " + std::to_string(n) + " backward passes");
    }
    checks.push_back(c);
  }
  {
    Check c{"two-ranks-metrics", "2 ranks: metrics printed by rank 0 equal the 1-rank run's"};
    // The 1-rank run printed what the original printed (checked above):
    // rank 0's lines are compared with the original's.
    auto originalLines = printedMetrics(original.out, reference.offsets);
    auto twoLines = printedMetrics(two.out, twoRecords[0].offsets);
    size_t compared = 0;
    for (const auto& [shape, printed] : twoLines) {
      auto other = originalLines.find(shape);
      if (other == originalLines.end()) continue;
      for (const Printed& p : printed) {
        for (size_t i = 0; i < p.metrics.size(); ++i) {
          std::vector<double> refs = referencesFor(p, i, other->second);
          if (refs.empty()) continue;
          ++compared;
          const double lo = *std::min_element(refs.begin(), refs.end());
          const double hi = *std::max_element(refs.begin(), refs.end());
          const double value = p.metrics[i].value;
          const bool accuracy = llvm::StringRef(p.metrics[i].word).contains_insensitive("acc");
          const double tolerance = accuracy ? std::max(o.accuracyTolerance, 0.1 * std::abs(hi))
                                            : o.metricTolerance * std::max(std::abs(lo), std::abs(hi)) + 0.02;
          if (value >= lo - tolerance && value <= hi + tolerance) continue;
          if (c.verdict == "fail") continue;  // the first difference is the story
          c.verdict = "fail";
          c.details.push_back("rank 0 prints " + p.metrics[i].word + " " + std::to_string(value) + " in `" +
                              p.line + "` (after " + std::to_string(static_cast<long>(p.steps)) +
                              " steps); the original printed " + std::to_string(lo) +
                              (hi != lo ? " to " + std::to_string(hi) : std::string()) +
                              " for the same epoch or after as many steps (tolerance " +
                              std::to_string(tolerance) + "): a metric summed on each rank's shard but divided "
                              "by the whole data set, or not reduced across ranks?");
          c.where = linesMatching(migratedSource, std::regex("\"[^\"]*" + escapeRegex(p.metrics[i].word)));
          auto reported = findingsOf("fabric-per-rank-metric");
          c.where.insert(c.where.end(), reported.begin(), reported.end());
        }
      }
    }
    if (compared == 0 && c.verdict == "pass") {
      c.verdict = "not run";
      c.details.push_back("no loss or accuracy line printed by both runs within " + std::to_string(o.steps) +
                          " steps: raise --steps to reach one");
    } else if (c.verdict == "pass") {
      c.details.push_back(std::to_string(compared) + " metrics compared");
    }
    checks.push_back(c);
  }
  {
    Check c{"two-ranks-files", "2 ranks: each file written by one rank"};
    auto writers = writersByFile(records + "/two/files.log", twoRecords, records);
    for (const auto& [path, ranks] : writers) {
      if (ranks.size() < 2) continue;
      c.verdict = "fail";
      std::string name = llvm::sys::path::filename(path).str();
      c.details.push_back(path + " is written by ranks " + ranksText(ranks) +
                          ": every rank overwrites it (write it on rank 0: fabric.is_global_zero(), "
                          "fabric.save, or a Fabric logger)");
      auto found = linesMatching(migratedSource, std::regex("\"[^\"]*" + escapeRegex(name)));
      c.where.insert(c.where.end(), found.begin(), found.end());
    }
    if (c.verdict == "pass") c.details.push_back(std::to_string(writers.size()) + " files written, each by one rank");
    checks.push_back(c);
  }

  // 4. Verdicts.
  int verdict = kEquivalent;
  for (const Check& c : checks)
    if (c.verdict == "fail") verdict = kDifferences;
  const std::string subject = o.buildPath.empty() ? joined(o.sources) : o.buildPath;
  llvm::outs() << "fabricize verify: " << subject << " (" << o.steps << " steps; work folder " << o.work << ")\n";
  for (const Check& c : checks) {
    std::string tag = c.verdict == "pass" ? "PASS " : c.verdict == "fail" ? "FAIL " : "NOT RUN ";
    llvm::outs() << "  " << tag << " " << c.title << "\n";
    for (const std::string& d : c.details) llvm::outs() << "        " << d << "\n";
    for (const std::string& w : c.where) llvm::outs() << "        at " << w << "\n";
  }
  llvm::outs() << (verdict == kEquivalent ? "verdict: equivalent\n" : "verdict: differences found\n");

  if (!o.report.empty()) {
    nlohmann::json report = {{"subject", subject}, {"steps", o.steps}, {"work", o.work},
                             {"verdict", verdict == kEquivalent ? "equivalent" : "differences"},
                             {"checks", nlohmann::json::array()}, {"migration_findings", migrationFindings}};
    for (const Check& c : checks)
      report["checks"].push_back({{"id", c.id}, {"title", c.title}, {"verdict", c.verdict},
                                  {"details", c.details}, {"where", c.where}});
    std::string problem = writeFileAtomically(o.report, report.dump(2) + "\n");
    llvm::SmallString<256> md(o.report);
    llvm::sys::path::replace_extension(md, "md");
    if (problem.empty()) problem = writeFileAtomically(std::string(md), markdown(checks, subject, verdict, migrationFindings,
                                                    o.migrated.empty() ? o.work + "/migration.md" : ""));
    if (!problem.empty()) return cannot(problem);
  }
  return verdict;
}

}  // namespace fabricize
