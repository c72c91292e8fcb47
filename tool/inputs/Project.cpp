#include "inputs/Project.h"

#include "outputs/Output.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

namespace fabricize {

namespace {

std::string resolvedIn(const std::string& dir, llvm::StringRef path) {
  llvm::SmallString<256> full(path);
  if (!llvm::sys::path::is_absolute(full)) {
    full = dir;
    llvm::sys::path::append(full, path);
  }
  return absolutePath(std::string(full));
}

}  // namespace

std::string absolutePath(const std::string& path) {
  llvm::SmallString<256> p(path);
  llvm::sys::fs::make_absolute(p);
  llvm::sys::path::remove_dots(p, /*remove_dot_dot=*/true);
  llvm::SmallString<256> real;
  if (!llvm::sys::fs::real_path(p, real)) return std::string(real);
  return std::string(p);
}

std::string commonFolder(const std::vector<std::string>& dirs) {
  if (dirs.empty()) return {};
  std::string common = dirs.front();
  for (const std::string& d : dirs)
    while (!isUnderOrEqual(d, common) && llvm::sys::path::has_parent_path(common) &&
           llvm::sys::path::parent_path(common) != common)
      common = llvm::sys::path::parent_path(common).str();
  return common;
}

namespace {

// CMakeCache.txt's entries, `NAME:TYPE=VALUE` lines: name -> value.
std::map<std::string, std::string> readCache(const std::string& buildDir) {
  std::map<std::string, std::string> cache;
  std::string text;
  if (!readFile(buildDir + "/CMakeCache.txt", text)) return cache;
  llvm::StringRef rest(text);
  while (!rest.empty()) {
    auto [line, next] = rest.split('\n');
    rest = next;
    line = line.rtrim("\r");
    if (line.empty() || line.starts_with("#") || line.starts_with("//")) continue;
    size_t colon = line.find(':'), equals = line.find('=');
    if (colon == llvm::StringRef::npos || equals == llvm::StringRef::npos || colon > equals) continue;
    cache[line.take_front(colon).str()] = line.substr(equals + 1).str();
  }
  return cache;
}

// The folder of the git work tree `dir` is in (a `.git` folder, or file for
// a worktree or submodule, in it or above); empty when none.
std::string gitWorkTreeOf(const std::string& dir) {
  for (std::string at = dir; !at.empty();) {
    if (llvm::sys::fs::exists(at + "/.git")) return at;
    std::string parent = llvm::sys::path::parent_path(at).str();
    if (parent == at) break;
    at = parent;
  }
  return {};
}

// The inputs of build.ninja's `build build.ninja ...: RERUN_CMAKE | ...`
// statement: what CMake re-runs on. Ninja escapes '$', ' ' and ':' with '$'
// and continues long lines with a trailing '$'.
bool ninjaConfigureInputs(const std::string& buildDir, std::vector<std::string>& out) {
  std::string text;
  if (!readFile(buildDir + "/build.ninja", text)) return false;
  std::string joined;
  joined.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '$' && i + 1 < text.size() && (text[i + 1] == '\n' || text[i + 1] == '\r')) {
      i += text[i + 1] == '\r' && i + 2 < text.size() && text[i + 2] == '\n' ? 2 : 1;
      while (i + 1 < text.size() && (text[i + 1] == ' ' || text[i + 1] == '\t')) ++i;
      continue;
    }
    if (text[i] == '$' && i + 1 < text.size()) {  // keep escapes whole for the tokenizer
      joined += text[i];
      joined += text[++i];
      continue;
    }
    joined += text[i];
  }
  llvm::StringRef rest(joined);
  while (!rest.empty()) {
    auto [line, next] = rest.split('\n');
    rest = next;
    if (!line.starts_with("build ")) continue;
    // Tokens: outputs ':' rule inputs ['|' implicit] ['||' order-only].
    std::vector<std::string> tokens;
    std::string token;
    bool sawColon = false;
    size_t colonToken = 0;
    auto flush = [&]() {
      if (!token.empty()) tokens.push_back(token);
      token.clear();
    };
    for (size_t i = 6; i < line.size(); ++i) {
      char c = line[i];
      if (c == '$' && i + 1 < line.size()) {
        token += line[++i];  // "$ ", "$:", "$$"
      } else if (c == ' ' || c == '\r') {
        flush();
      } else if (c == ':' && !sawColon) {
        flush();
        sawColon = true;
        colonToken = tokens.size();
      } else {
        token += c;
      }
    }
    flush();
    if (!sawColon || colonToken >= tokens.size() || tokens[colonToken] != "RERUN_CMAKE") continue;
    for (size_t t = colonToken + 1; t < tokens.size(); ++t) {
      if (tokens[t] == "||") break;
      if (tokens[t] == "|") continue;
      out.push_back(resolvedIn(buildDir, tokens[t]));
    }
    return true;
  }
  return false;
}

// set(CMAKE_MAKEFILE_DEPENDS "..." ...) in CMakeFiles/Makefile.cmake, what
// the Makefile generator re-runs CMake on.
bool makefileConfigureInputs(const std::string& buildDir, std::vector<std::string>& out) {
  std::string text;
  if (!readFile(buildDir + "/CMakeFiles/Makefile.cmake", text)) return false;
  size_t at = text.find("set(CMAKE_MAKEFILE_DEPENDS");
  if (at == std::string::npos) return false;
  size_t end = text.find(')', at);
  if (end == std::string::npos) return false;
  for (size_t i = at; i < end; ++i) {
    if (text[i] != '"') continue;
    std::string path;
    for (++i; i < end && text[i] != '"'; ++i) {
      if (text[i] == '\\' && i + 1 < end) ++i;
      path += text[i];
    }
    if (!path.empty()) out.push_back(resolvedIn(buildDir, path));
  }
  return true;
}

}  // namespace

bool isUnderOrEqual(const std::string& path, const std::string& root) {
  if (root == "/") return !path.empty() && path[0] == '/';
  return path == root ||
         (path.size() > root.size() && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/');
}

std::string commonDirectory(const std::vector<std::string>& paths) {
  std::vector<std::string> parents;
  for (const std::string& p : paths) parents.push_back(llvm::sys::path::parent_path(p).str());
  return commonFolder(parents);
}

bool isCMakeScript(const std::string& path) {
  llvm::StringRef name = llvm::sys::path::filename(path);
  return name == "CMakeLists.txt" || name.ends_with(".cmake");
}

BuildTree readBuildTree(const std::string& buildDir) {
  BuildTree build;
  build.buildDir = absolutePath(buildDir);
  build.cache = readCache(build.buildDir);
  if (auto home = build.cache.find("CMAKE_HOME_DIRECTORY");
      home != build.cache.end() && !home->second.empty() && llvm::sys::fs::is_directory(home->second))
    build.cmakeSourceDir = absolutePath(home->second);
  if (build.cmakeSourceDir.empty()) return build;
  std::vector<std::string> inputs;
  build.configureInputsKnown =
      ninjaConfigureInputs(build.buildDir, inputs) || makefileConfigureInputs(build.buildDir, inputs);
  std::set<std::string> seen;
  for (std::string& path : inputs)
    if (seen.insert(path).second) build.configureInputs.push_back(std::move(path));
  return build;
}

namespace {

// CMake files the configure step read that are not the project's: CMake's
// own modules, the packages it found (each <Package>_DIR), files the
// command line injected (toolchain, project includes).
bool isForeignCMakeFile(const BuildTree& build, const std::string& path) {
  for (const auto& [name, value] : build.cache) {
    if (value.empty()) continue;
    llvm::StringRef key(name);
    bool folder = key == "CMAKE_ROOT" || (key.ends_with("_DIR") && !key.starts_with("CMAKE_"));
    bool file = key == "CMAKE_TOOLCHAIN_FILE" || key.starts_with("CMAKE_PROJECT_INCLUDE") ||
                key == "CMAKE_PROJECT_TOP_LEVEL_INCLUDES" ||
                (key.starts_with("CMAKE_PROJECT_") && key.ends_with("_INCLUDE"));
    if (folder && isUnderOrEqual(path, absolutePath(value))) return true;
    if (file) {
      llvm::SmallVector<llvm::StringRef, 2> entries;
      llvm::StringRef(value).split(entries, ';', -1, false);
      for (llvm::StringRef entry : entries)
        if (absolutePath(entry.str()) == path) return true;
    }
  }
  return false;
}

bool isSystemPath(const std::string& path) {
  for (const char* prefix : {"/usr", "/opt", "/etc", "/var", "/snap", "/nix"})
    if (isUnderOrEqual(path, prefix)) return true;
  return false;
}

}  // namespace

std::string projectRootOf(const BuildTree& build, const clang::tooling::CompilationDatabase& database,
                          std::string* how) {
  if (!build.cmakeSourceDir.empty()) {
    // The smallest folder holding the CMake source directory, every source
    // the build compiles and every CMake file its configure step read that
    // is the project's (a project folder inside a repository pulls shared
    // code from ../../utils): -o then mirrors a tree that configures, and -i
    // edits those files too. The git work tree, when there is one, bounds
    // what counts as the project's.
    std::string git = gitWorkTreeOf(build.cmakeSourceDir);
    bool inSystem = isSystemPath(build.cmakeSourceDir);
    auto isProjects = [&](const std::string& path) {
      if (isUnderOrEqual(path, build.cmakeSourceDir)) return true;
      if (isUnderOrEqual(path, build.buildDir)) return false;  // generated by the build
      if (!git.empty()) return isUnderOrEqual(path, git);
      return inSystem || !isSystemPath(path);
    };
    std::vector<std::string> folders{build.cmakeSourceDir}, outside;
    for (const clang::tooling::CompileCommand& command : database.getAllCompileCommands()) {
      std::string directory =
          command.Directory.empty() ? build.buildDir : resolvedIn(build.buildDir, command.Directory);
      std::string file = resolvedIn(directory, command.Filename);
      if (!llvm::sys::fs::is_regular_file(file) || !isProjects(file)) continue;
      folders.push_back(llvm::sys::path::parent_path(file).str());
      if (!isUnderOrEqual(file, build.cmakeSourceDir)) outside.push_back(file);
    }
    for (const std::string& input : build.configureInputs) {
      if (!isCMakeScript(input) || !isProjects(input) || isForeignCMakeFile(build, input)) continue;
      folders.push_back(llvm::sys::path::parent_path(input).str());
      if (!isUnderOrEqual(input, build.cmakeSourceDir)) outside.push_back(input);
    }
    std::string root = commonFolder(folders);
    const char* home = std::getenv("HOME");
    bool tooWide = root == "/" || (home && *home && root == absolutePath(home));
    if (outside.empty() || tooWide) {
      if (how) *how = "the CMake source directory named by " + build.buildDir + "/CMakeCache.txt";
      return build.cmakeSourceDir;
    }
    if (how) {
      std::sort(outside.begin(), outside.end());
      std::string named;
      for (size_t i = 0; i < outside.size() && i < 3; ++i)
        named += (i ? ", " : "") + outside[i].substr(root.size() + 1);
      if (outside.size() > 3) named += " and " + std::to_string(outside.size() - 3) + " more";
      *how = "the smallest folder holding the CMake source directory " + build.cmakeSourceDir +
             " and what its build reads outside it: " + named +
             (git.empty() ? std::string() : "; all inside the git work tree " + git);
    }
    return root;
  }
  std::vector<std::string> files, folders;
  for (const clang::tooling::CompileCommand& command : database.getAllCompileCommands()) {
    std::string directory = command.Directory.empty() ? build.buildDir : resolvedIn(build.buildDir, command.Directory);
    files.push_back(resolvedIn(directory, command.Filename));
    folders.push_back(directory);
  }
  if (files.empty()) {
    if (how) *how = "the build directory (its compile_commands.json lists nothing)";
    return build.buildDir;
  }
  std::string filesOnly = commonDirectory(files);
  std::vector<std::string> all = folders;
  for (const std::string& f : files) all.push_back(llvm::sys::path::parent_path(f).str());
  std::string withFolders = commonFolder(all);
  const char* home = std::getenv("HOME");
  if (withFolders == "/" || (home && *home && withFolders == absolutePath(home))) {
    if (how) *how = "the common folder of the sources compile_commands.json lists";
    return filesOnly;
  }
  if (how) *how = "the common folder of the sources and directories compile_commands.json lists";
  return withFolders;
}

std::string projectRootForFile(const std::string& file, const std::string& commandsDir) {
  std::string dir = llvm::sys::path::parent_path(absolutePath(file)).str();
  // The root of the compile_commands.json in `at`, if there is one there.
  auto rootFrom = [&](const std::string& at) -> std::optional<std::string> {
    if (!llvm::sys::fs::exists(at + "/compile_commands.json")) return std::nullopt;
    std::string error;
    auto database = clang::tooling::CompilationDatabase::loadFromDirectory(at, error);
    if (!database) return dir;
    std::string root = projectRootOf(readBuildTree(at), *database);
    // A database elsewhere that does not list this file says nothing about it.
    return isUnderOrEqual(absolutePath(file), root) ? root : dir;
  };
  if (!commandsDir.empty()) return rootFrom(commandsDir).value_or(dir);
  // Where the language server finds the commands (as clangd): each folder
  // above the file, then its build/ subfolder; the nearest wins.
  for (std::string at = dir; !at.empty();) {
    if (auto root = rootFrom(at)) return *root;
    if (auto root = rootFrom(at + "/build")) return *root;
    std::string parent = llvm::sys::path::parent_path(at).str();
    if (parent == at) break;
    at = parent;
  }
  return dir;
}

}  // namespace fabricize
