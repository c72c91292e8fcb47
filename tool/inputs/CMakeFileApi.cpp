#include "inputs/CMakeFileApi.h"

#include "outputs/Output.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <map>
#include <set>

namespace fabricize {

namespace {

using nlohmann::json;

constexpr const char* kClient = "client-fabricize";

bool readJson(const std::string& path, json& out) {
  std::string text;
  if (!readFile(path, text)) return false;
  out = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return !out.is_discarded();
}

llvm::sys::TimePoint<> modified(const std::string& path) {
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(path, status)) return {};
  return status.getLastModificationTime();
}

// The newest reply index and, in it, fabricize's codemodel file; empty when
// there is none.
std::string replyCodeModel(const std::string& replyDir, std::string& index, std::string& error) {
  std::error_code ec;
  std::string newest;
  for (llvm::sys::fs::directory_iterator it(replyDir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = llvm::sys::path::filename(it->path()).str();
    if (llvm::StringRef(name).starts_with("index-") && name > newest) newest = name;
  }
  if (newest.empty()) return {};
  index = replyDir + "/" + newest;
  json reply;
  if (!readJson(index, reply)) return {};
  const json* ours = nullptr;
  if (reply.contains("reply") && reply["reply"].contains(kClient)) ours = &reply["reply"][kClient];
  if (!ours || !ours->contains("codemodel-v2")) return {};
  const json& entry = (*ours)["codemodel-v2"];
  if (entry.contains("error")) {
    error = entry["error"].get<std::string>();
    return {};
  }
  if (!entry.contains("jsonFile")) return {};
  return replyDir + "/" + entry["jsonFile"].get<std::string>();
}

// Re-runs CMake's configure step on the build, so it writes the reply.
bool reconfigure(const BuildTree& build, std::string& why) {
  auto cached = build.cache.find("CMAKE_COMMAND");
  std::string cmake = cached == build.cache.end() ? std::string() : cached->second;
  if (cmake.empty() || !llvm::sys::fs::can_execute(cmake)) {
    auto found = llvm::sys::findProgramByName("cmake");
    if (!found) {
      why = "cmake was not found to re-run the configure step of " + build.buildDir;
      return false;
    }
    cmake = *found;
  }
  llvm::SmallString<128> log;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("fabricize-cmake", "log", log)) {
    why = "cannot create a temporary file: " + ec.message();
    return false;
  }
  std::vector<llvm::StringRef> argv = {cmake, build.buildDir};
  std::optional<llvm::StringRef> redirects[] = {llvm::StringRef("/dev/null"), llvm::StringRef(log),
                                                llvm::StringRef(log)};
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(cmake, argv, std::nullopt, redirects, /*SecondsToWait=*/600, 0, &error);
  std::string output;
  readFile(std::string(log), output);
  llvm::sys::fs::remove(log);
  if (rc == 0) return true;
  llvm::StringRef tail(output);
  tail = tail.trim();
  if (tail.size() > 1500) tail = tail.take_back(1500);
  why = "re-running CMake's configure step (" + cmake + " " + build.buildDir + ") failed" +
        (error.empty() ? "" : ": " + error) + (tail.empty() ? "" : ":\n" + tail.str());
  return false;
}

// A link fragment's file, as CMake wrote it: a path, `-lname`, or a path
// inside linker flags (`-Wl,--no-as-needed,"/usr/lib/libtorch_cpu.so"`).
bool fragmentNames(llvm::StringRef fragment, std::initializer_list<llvm::StringRef> prefixes) {
  llvm::SmallVector<llvm::StringRef, 8> tokens;
  fragment.split(tokens, llvm::StringRef(" ,\""), -1, /*KeepEmpty=*/false);
  for (llvm::StringRef token : tokens) {
    llvm::StringRef name = llvm::sys::path::filename(token.trim("\"' "));
    if (name.consume_front("-l")) {
      for (llvm::StringRef prefix : prefixes)
        if (name == prefix.drop_front(3) || name.starts_with(prefix.drop_front(3).str() + "_")) return true;
      continue;
    }
    for (llvm::StringRef prefix : prefixes)
      if (name.starts_with(prefix) &&
          (name.size() == prefix.size() || name[prefix.size()] == '.' || name[prefix.size()] == '_'))
        return true;
  }
  return false;
}

bool isLibTorch(llvm::StringRef fragment) { return fragmentNames(fragment, {"libtorch", "libc10"}); }
bool isFabric(llvm::StringRef fragment) { return fragmentNames(fragment, {"libfabric"}); }

// An include folder that provides `header` (<torch/torch.h>: LibTorch's
// C++ API, wherever it is installed).
bool providesHeader(const std::string& folder, llvm::StringRef header) {
  if (folder.empty()) return false;
  llvm::SmallString<256> path(folder);
  llvm::sys::path::append(path, header);
  return llvm::sys::fs::is_regular_file(path);
}

std::string resolved(const std::string& sourceDir, const std::string& path) {
  if (llvm::sys::path::is_absolute(path)) return absolutePath(path);
  llvm::SmallString<256> full(sourceDir);
  llvm::sys::path::append(full, path);
  return absolutePath(std::string(full));
}

}  // namespace

std::optional<CodeModel> readCodeModel(const BuildTree& build, std::string& why, bool verbose) {
  if (build.cmakeSourceDir.empty()) {
    why = build.buildDir + " is not a CMake build directory";
    return std::nullopt;
  }
  std::string api = build.buildDir + "/.cmake/api/v1";
  std::string query = api + "/query/" + kClient;
  std::string queryFile = query + "/codemodel-v2";
  bool asked = llvm::sys::fs::exists(queryFile);
  if (!asked) {
    if (std::error_code ec = llvm::sys::fs::create_directories(query)) {
      why = "cannot write CMake's File API query under " + api + ": " + ec.message();
      return std::nullopt;
    }
    std::string problem = writeFileAtomically(queryFile, "");
    if (!problem.empty()) {
      why = problem;
      return std::nullopt;
    }
  }
  std::string index, replyError;
  std::string codemodelFile = asked ? replyCodeModel(api + "/reply", index, replyError) : std::string();
  bool stale = codemodelFile.empty();
  if (!stale) {
    auto replied = modified(index);
    stale = modified(build.buildDir + "/CMakeCache.txt") > replied;
    for (const std::string& input : build.configureInputs) stale = stale || modified(input) > replied;
  }
  if (stale) {
    if (verbose) llvm::errs() << "fabricize: asking CMake for the codemodel of " << build.buildDir << "\n";
    if (!reconfigure(build, why)) return std::nullopt;
    replyError.clear();
    codemodelFile = replyCodeModel(api + "/reply", index, replyError);
  }
  if (codemodelFile.empty()) {
    why = replyError.empty() ? "CMake wrote no codemodel for " + build.buildDir + " (CMake 3.14 or newer is needed)"
                             : "CMake's codemodel for " + build.buildDir + ": " + replyError;
    return std::nullopt;
  }

  json codemodel;
  if (!readJson(codemodelFile, codemodel) || !codemodel.contains("configurations") ||
      codemodel["configurations"].empty()) {
    why = "cannot read CMake's codemodel " + codemodelFile;
    return std::nullopt;
  }
  std::string sourceDir = codemodel.value("/paths/source"_json_pointer, build.cmakeSourceDir);
  std::string replyDir = llvm::sys::path::parent_path(codemodelFile).str();
  CodeModel model;
  // (file, line) -> its entry in model.libTorchLinks
  std::map<std::pair<std::string, unsigned>, size_t> linkIndex;
  for (const json& entry : codemodel["configurations"][0].value("targets", json::array())) {
    json target;
    if (!entry.contains("jsonFile") || !readJson(replyDir + "/" + entry["jsonFile"].get<std::string>(), target))
      continue;
    std::string name = target.value("name", "");
    // A target uses LibTorch when it compiles against <torch/torch.h>'s
    // folder (every kind of target, static libraries too) or links its
    // libraries; the runtime alike. Each such include folder and library
    // carries the backtrace of the command that brought it.
    struct Use {
      bool torch = false, fabric = false;
      // Where its LibTorch libraries and include folders came from. A target
      // that links (an executable, a shared library) is edited where its
      // libraries came from, which may be a library it links PUBLIC: it then
      // gets the runtime the same way. Static libraries do not link: where
      // the include folder came from.
      std::vector<size_t> linkBacktraces, includeBacktraces;
    } use;
    const json fragments = target.value("/link/commandFragments"_json_pointer, json::array());
    for (const json& f : fragments) {
      if (f.value("role", "") != "libraries") continue;
      std::string text = f.value("fragment", "");
      if (isLibTorch(text)) {
        use.torch = true;
        if (f.contains("backtrace")) use.linkBacktraces.push_back(f["backtrace"].get<size_t>());
      }
      use.fabric = use.fabric || isFabric(text);
    }
    for (const json& group : target.value("compileGroups", json::array()))
      for (const json& include : group.value("includes", json::array())) {
        std::string path = include.value("path", "");
        if (providesHeader(path, "torch/torch.h")) {
          use.torch = true;
          if (include.contains("backtrace")) use.includeBacktraces.push_back(include["backtrace"].get<size_t>());
        }
        use.fabric = use.fabric || providesHeader(path, "fabric/fabric.h");
      }
    if (!use.torch) continue;
    model.libTorchTargets.push_back(name);
    if (use.fabric) {
      model.fabricTargets.push_back(name);
      continue;
    }
    const json& graph = target["backtraceGraph"];
    const json nodes = graph.value("nodes", json::array());
    const json commands = graph.value("commands", json::array());
    const json files = graph.value("files", json::array());
    // The command invocations that brought LibTorch. LibTorch's own
    // dependencies (set in its package's files) come with it.
    std::set<std::pair<std::string, unsigned>> sites, otherSites;
    for (size_t at : use.linkBacktraces.empty() ? use.includeBacktraces : use.linkBacktraces) {
      if (at >= nodes.size()) continue;
      const json& node = nodes[at];
      if (!node.contains("command") || !node.contains("file") || !node.contains("line")) continue;
      std::string command = commands[node["command"].get<size_t>()].get<std::string>();
      std::string file = resolved(sourceDir, files[node["file"].get<size_t>()].get<std::string>());
      auto site = std::make_pair(file, node["line"].get<unsigned>());
      // A target made after link_libraries(...): CMake names its add_executable.
      if (command == "target_link_libraries" || command == "link_libraries" || command == "add_executable" ||
          command == "add_library") {
        sites.insert(site);
        if (!linkIndex.count(site)) {
          linkIndex[site] = model.libTorchLinks.size();
          model.libTorchLinks.push_back({file, site.second, command, {}});
        }
      } else if (!llvm::StringRef(command).equals_insensitive("set_target_properties") &&
                 !llvm::StringRef(command).equals_insensitive("set_property")) {
        otherSites.insert(site);
      }
    }
    bool executable = target.value("type", "") == "EXECUTABLE";
    std::vector<std::string> sources;
    for (const json& source : target.value("sources", json::array()))
      if (source.contains("path")) sources.push_back(resolved(sourceDir, source["path"].get<std::string>()));
    auto serve = [&](CodeModel::LibTorchLink& link) {
      link.targets.push_back(name);
      link.onlyExecutables &= executable;
      link.sources.insert(link.sources.end(), sources.begin(), sources.end());
    };
    for (const auto& site : sites) serve(model.libTorchLinks[linkIndex[site]]);
    if (sites.empty()) {
      // Linked some other way (a property set by hand): reported where it is.
      for (const auto& site : otherSites) {
        if (!linkIndex.count(site)) {
          linkIndex[site] = model.libTorchLinks.size();
          model.libTorchLinks.push_back({site.first, site.second, "", {}});
        }
        serve(model.libTorchLinks[linkIndex[site]]);
      }
    }
  }
  return model;
}

}  // namespace fabricize
