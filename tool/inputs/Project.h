// The project a build directory describes: its root (the CMake source
// directory its CMakeCache.txt names, else the compile database's common
// folder) and the files CMake's configure step read, so `-p build` is all a
// user gives and `-o out` mirrors a tree that `cmake -S out` configures.
#pragma once

#include "clang/Tooling/CompilationDatabase.h"

#include <map>
#include <string>
#include <vector>

namespace fabricize {

// The id findings about the project's shape are reported under (a source
// outside the root, a generated file a rule would edit).
inline constexpr const char* kProjectRuleId = "fabric-project";

struct BuildTree {
  std::string buildDir;        // absolute
  std::string cmakeSourceDir;  // CMAKE_HOME_DIRECTORY; empty: not a CMake build (or it no longer exists)
  // Every file the configure step read, as CMake records it to know when to
  // re-run (build.ninja's RERUN_CMAKE dependencies, or the Makefile
  // generator's CMAKE_MAKEFILE_DEPENDS): absolute, in CMake's order.
  std::vector<std::string> configureInputs;
  bool configureInputsKnown = false;         // false: neither file was found or readable
  std::map<std::string, std::string> cache;  // CMakeCache.txt: name -> value
};

// What `buildDir` says about its project. Never fails: what it cannot read
// stays empty.
BuildTree readBuildTree(const std::string& buildDir);

// The project root `-p` implies: the CMake source directory, else the common
// folder of the database's files and the directories its commands run in
// (the files' own common folder when that would be / or $HOME: a build
// directory beside the project says nothing about where the project is).
// `how` says which, for --verbose.
std::string projectRootOf(const BuildTree& build, const clang::tooling::CompilationDatabase& database,
                          std::string* how = nullptr);

// The root of the project `file` belongs to, for a front end that has no -p
// (the language server): found through the compile_commands.json where the
// server finds the file's commands (a folder above it or its build/
// subfolder, or `commandsDir` when given), else the file's directory.
std::string projectRootForFile(const std::string& file, const std::string& commandsDir = "");

// Whether a configure input is a CMake script (CMakeLists.txt, *.cmake) the
// build-file migration reads, rather than, say, a configure_file template.
bool isCMakeScript(const std::string& path);

// `path` made absolute, `.` and `..` removed, symlinks resolved when it exists.
std::string absolutePath(const std::string& path);
bool isUnderOrEqual(const std::string& path, const std::string& root);
std::string commonDirectory(const std::vector<std::string>& paths);  // of the paths' parent folders
std::string commonFolder(const std::vector<std::string>& folders);   // the deepest holding them all

}  // namespace fabricize
