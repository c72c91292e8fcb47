#include "verify/VerifyHarness.h"

#include "outputs/Output.h"
#include "inputs/Project.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>

extern char** environ;

namespace fabricize {

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

std::vector<std::string> filesIn(const std::string& folder) {
  std::vector<std::string> out;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(folder, ec), end; it != end && !ec; it.increment(ec))
    if (it->type() == llvm::sys::fs::file_type::regular_file) out.push_back(it->path().substr(folder.size() + 1));
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// Files and symbolic links under `folder` (links not followed: -o links a
// data folder to the original, which is not the tree's to copy).
std::vector<std::pair<std::string, bool>> entriesIn(const std::string& folder) {
  std::vector<std::pair<std::string, bool>> out;  // relative path, is a link
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(folder, ec, /*follow_symlinks=*/false), end; it != end && !ec;
       it.increment(ec)) {
    const auto type = it->type();
    if (type == llvm::sys::fs::file_type::regular_file || type == llvm::sys::fs::file_type::symlink_file)
      out.emplace_back(it->path().substr(folder.size() + 1), type == llvm::sys::fs::file_type::symlink_file);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "" when `path` is not a symbolic link.
std::string linkTargetOf(const std::string& path) {
  std::string text(4096, '\0');
  const ssize_t length = ::readlink(path.c_str(), text.data(), text.size());
  return length < 0 ? std::string() : text.substr(0, static_cast<size_t>(length));
}

}  // namespace

std::string joined(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// Makes `to` hold what `from` holds, rewriting only files whose content
// changed (their times tell the build what to recompile); `from` is removed.
std::string syncTree(const std::string& from, const std::string& to) {
  std::set<std::string> wanted;
  const std::vector<std::pair<std::string, bool>> entries = entriesIn(from);
  for (const auto& [relative, isLink] : entries) {
    wanted.insert(relative);
    const std::string source = from + "/" + relative;
    const std::string target = to + "/" + relative;
    if (isLink) {
      const std::string linkTarget = linkTargetOf(source), existing = linkTargetOf(target);
      if (existing == linkTarget) continue;
      if (existing.empty() && llvm::sys::fs::is_directory(target))
        llvm::sys::fs::remove_directories(target);  // an earlier run's copy of what is now a link
      llvm::sys::fs::remove(target);
      llvm::sys::fs::create_directories(llvm::sys::path::parent_path(target));
      if (std::error_code ec = llvm::sys::fs::create_link(linkTarget, target))
        return "cannot create the link " + target + ": " + ec.message();
      continue;
    }
    std::string text = contentsOf(source);
    if (!(llvm::sys::fs::exists(target) && contentsOf(target) == text))
      if (std::string problem = writeFileAtomically(target, text); !problem.empty()) return problem;
    // The copy's permissions (a script stays executable).
    if (auto mode = llvm::sys::fs::getPermissions(source)) llvm::sys::fs::setPermissions(target, *mode);
  }
  if (llvm::sys::fs::exists(to))
    for (const auto& [relative, isLink] : entriesIn(to))
      if (!wanted.count(relative)) llvm::sys::fs::remove(to + "/" + relative);
  // The links first, as links: nothing below removes what one points to (a
  // data folder -o linked is the user's original).
  for (const auto& [relative, isLink] : entries)
    if (isLink) ::unlink((from + "/" + relative).c_str());
  llvm::sys::fs::remove_directories(from);
  return "";
}

// How a run ended, and after which step on each rank.
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

namespace {

// Runs `command` in `cwd` with `extraEnvironment` over this process's,
// stdout and stderr to files. Folders it needs are made.
Run execute(const std::vector<std::string>& command, const std::string& cwd,
            const std::map<std::string, std::string>& extraEnvironment, const std::string& logStem, unsigned timeout) {
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

// `folder` (made if missing) gets a link to each entry of `inputs`: what
// the program reads by relative path. Returns what failed, or "".
std::string linkInputs(const std::string& inputs, const std::string& folder) {
  llvm::sys::fs::create_directories(folder);
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(inputs, ec), end; it != end && !ec; it.increment(ec)) {
    const std::string link = folder + "/" + llvm::sys::path::filename(it->path()).str();
    if (std::error_code failed = llvm::sys::fs::create_link(it->path(), link))
      return "cannot link " + it->path() + " as " + link + " (--inputs): " + failed.message();
  }
  return ec ? "cannot list --inputs " + inputs + ": " + ec.message() : "";
}

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
    } else if (kind == "strategy") {
      r.strategy = a;
    } else if (kind == "share") {
      r.shares.push_back({a, std::atoll(b.c_str()), std::atoll(c.c_str())});
    }
  }
  return r;
}

std::vector<std::string> elfExecutables(const std::string& build) {
  std::vector<std::string> found;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(build, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef path = it->path();
    if (path.contains("/CMakeFiles/")) {
      if (it->type() == llvm::sys::fs::file_type::directory_file) it.no_push();
      continue;
    }
    if (it->type() != llvm::sys::fs::file_type::regular_file || llvm::sys::path::filename(path).contains('.')) continue;
    if (!llvm::sys::fs::can_execute(path)) continue;
    char head[4] = {};
    std::ifstream(path.str(), std::ios::binary).read(head, sizeof head);
    if (std::string(head, sizeof head) ==
        "\x7f"
        "ELF")
      found.push_back(path.str());
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
  std::vector<std::string> configure{*cmake,
                                     "-S",
                                     source,
                                     "-B",
                                     build,
                                     "-DCMAKE_BUILD_TYPE=Release",
                                     "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG",
                                     "-DCMAKE_PREFIX_PATH=" + o.fabricDir};
  if (llvm::sys::fs::exists(include)) configure.push_back("-DCMAKE_PROJECT_INCLUDE=" + include);
  configure.insert(configure.end(), o.cmakeArgs.begin(), o.cmakeArgs.end());
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
  error = found.empty()
              ? "the build of " + build + " made no executable"
              : "the project builds several executables (" + joined(found) + "): choose one with --target NAME";
  return "";
}

std::string locate(const char* argv0, std::string& fabricizePath) {
  static int anchor;
  fabricizePath = llvm::sys::fs::getMainExecutable(argv0, &anchor);
  llvm::SmallString<256> prefix(llvm::sys::path::parent_path(llvm::sys::path::parent_path(fabricizePath)));
  return std::string(prefix);
}

}  // namespace

bool buildPrograms(VerifyOptions& o, const char* argv0, VerifyPrograms& programs, std::string& error) {
  std::string fabricize;
  const std::string prefix = locate(argv0, fabricize);
  if (o.fabricDir.empty()) {
    for (const std::string& candidate : {prefix, prefix + "/lib/cmake/Fabric"})
      if (llvm::sys::fs::exists(candidate + "/FabricConfig.cmake")) o.fabricDir = candidate;
    if (o.fabricDir.empty()) {
      error = "no FabricConfig.cmake beside " + fabricize + ": give --fabric-dir <the Fabric package>";
      return false;
    }
  }
  o.fabricDir = absolutePath(o.fabricDir);
  programs.preload = prefix + "/lib/libfabric_verify_files.so";
  if (!llvm::sys::fs::exists(programs.preload)) {
    error = programs.preload +
            " is missing (it tells which rank writes which file): build the runtime's "
            "fabric_verify_files target";
    return false;
  }
  if (o.work.empty()) {
    llvm::SmallString<128> folder;
    if (llvm::sys::fs::createUniqueDirectory("fabricize-verify", folder)) {
      error = "cannot make a scratch folder";
      return false;
    }
    o.work = std::string(folder);
  }
  o.work = absolutePath(o.work);
  llvm::sys::fs::create_directories(o.work);
  llvm::sys::fs::remove_directories(o.work + "/records");
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
    if (instrumented)
      command.push_back("--instrument-for-verify");
    else
      command.insert(command.end(), {"--report", o.work + "/migration.json", "--report", o.work + "/migration.md",
                                     "--report", o.work + "/migration.html"});
    if (o.sawDashDash) {
      command.push_back("--");
      command.insert(command.end(), o.compilerFlags.begin(), o.compilerFlags.end());
    }
    Run run = execute(command, o.work, {}, o.work + (instrumented ? "/instrument" : "/migrate"), 0);
    if (run.exitCode != 0 && run.exitCode != 1)
      return std::string(instrumented ? "instrumenting" : "migrating") + " failed:\n" + tail(run.err, 30);
    return syncTree(fresh, out);
  };
  for (const char* stale : {"/migration.json", "/migration.md", "/migration.html"})
    llvm::sys::fs::remove(o.work + stale);
  const std::string originalTree = o.work + "/original";
  std::string& migratedTree = programs.migratedTree;
  migratedTree = o.work + "/migrated";
  llvm::errs() << "fabricize verify: writing the instrumented original and the migration in " << o.work << "\n";
  if (error = writeTree(originalTree, true); !error.empty()) return false;
  if (o.migrated.empty()) {
    if (error = writeTree(migratedTree, false); !error.empty()) return false;
  } else {
    migratedTree = absolutePath(o.migrated);
    if (!llvm::sys::fs::exists(migratedTree + "/CMakeLists.txt")) {
      error = "--migrated " + o.migrated + " has no CMakeLists.txt: give the migrated project's root";
      return false;
    }
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
  std::string* binaries[2] = {&programs.original, &programs.migrated};
  const std::string trees[2] = {originalTree + projectFolder, migratedTree + projectFolder};
  const char* names[2] = {"original", "migrated"};
  for (int i = 0; i < 2; ++i) {
    // One build folder per tree (a CMake build belongs to one source folder).
    const std::string build =
        o.work + "/build-" + names[i] +
        (i == 1 && !o.migrated.empty() ? "-" + std::to_string(std::hash<std::string>()(migratedTree)) : "");
    if (std::string problem = buildProject(trees[i], build, o, o.work + "/" + names[i]); !problem.empty()) {
      error = "the " + std::string(names[i]) + " program: " + problem;
      return false;
    }
    *binaries[i] = pickExecutable(build, o, error);
    if (binaries[i]->empty()) return false;
  }

  return true;
}

bool runPrograms(const VerifyOptions& o, const VerifyPrograms& programs, VerifyRuns& runs, std::string& error) {
  runs.recordsFolder = o.work + "/records";
  // Each in an empty folder.
  auto runProgram = [&](const std::string& name, const std::string& binary, int ranks) {
    const std::string recordFolder = runs.recordsFolder + "/" + name;
    llvm::sys::fs::create_directories(recordFolder);
    std::map<std::string, std::string> env{{"FABRIC_VERIFY_RECORD", recordFolder},
                                           {"FABRIC_VERIFY_STEPS", std::to_string(o.steps)},
                                           {"FABRIC_VERIFY_FILES", recordFolder + "/files.log"},
                                           {"LD_PRELOAD", programs.preload}};
    if (ranks > 0) env["LT_DEVICES"] = std::to_string(ranks);
    if (ranks > 1) env["FABRIC_CHECK_SYNC"] = "1";
    if (!o.accelerator.empty()) {
      env["LT_ACCELERATOR"] = o.accelerator;
      if (o.accelerator == "cpu") env["CUDA_VISIBLE_DEVICES"] = "";
    }
    std::vector<std::string> command{binary};
    command.insert(command.end(), o.programArgs.begin(), o.programArgs.end());
    llvm::errs() << "fabricize verify: running " << name << "\n";
    const std::string folder = o.work + "/runs/" + name;
    if (!o.inputs.empty()) {
      if (std::string failed = linkInputs(absolutePath(o.inputs), folder); !failed.empty()) {
        Run unstaged;
        unstaged.exitCode = 1;
        unstaged.err = "fabricize verify: " + failed;
        return unstaged;
      }
    }
    return execute(command, folder, env, recordFolder + "/console", o.timeout);
  };
  runs.original = runProgram("original", programs.original, 0);
  Run& original = runs.original;
  std::vector<Record>& originalRecord = runs.originalRecord;
  originalRecord = {readRecord(runs.recordsFolder + "/original/rank0.txt")};
  if (original.exitCode != 0 || original.timedOut) {
    error = "the original program " + runStory(original, originalRecord) + ":\n" + tail(original.err, 20);
    return false;
  }
  if (!originalRecord[0].present || originalRecord[0].steps.empty()) {
    error =
        "the original program made no optimizer step that fabricize could record (no "
        "optimizer.step() in the project's code?)";
    return false;
  }
  runs.one = runProgram("one", programs.migrated, 1);
  runs.two = runProgram("two", programs.migrated, 2);
  runs.oneRecord = {readRecord(runs.recordsFolder + "/one/rank0.txt")};
  for (int rank = 0; rank < 2; ++rank)
    runs.twoRecords.push_back(readRecord(runs.recordsFolder + "/two/rank" + std::to_string(rank) + ".txt"));

  if (auto text = contentsOf(o.work + "/migration.json"); !text.empty()) {
    auto parsed = nlohmann::json::parse(text, nullptr, false);
    if (!parsed.is_discarded() && parsed.contains("findings")) runs.migrationFindings = parsed["findings"];
    if (!parsed.is_discarded() && parsed.contains("data_loops")) runs.migrationDataLoops = parsed["data_loops"];
  }
  return true;
}

}  // namespace fabricize
