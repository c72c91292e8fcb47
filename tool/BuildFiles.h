// The project's build files: a CMakeLists.txt that builds a LibTorch program
// gains find_package(Fabric) and links Fabric::fabric wherever it links
// LibTorch, so the migrated sources build against the runtime.
#pragma once

#include "EditSet.h"

#include <string>
#include <vector>

namespace fabricize {

// The id build-file edits and notes are reported under.
inline constexpr const char* kCMakeRuleId = "fabric-cmake";

struct BuildFileMigration {
  std::vector<TextEdit> edits;  // offsets into the CMakeLists.txt text
  // What a person must do by hand, with the 1-based line it is about.
  struct Note {
    unsigned line = 0;
    std::string message;
  };
  std::vector<Note> notes;
};

// Edits for all the CMake files of one project at once (texts[0] is the
// top-level CMakeLists.txt; the result is parallel to `texts`):
// `find_package(Fabric CONFIG REQUIRED)` on the line after each
// `find_package(Torch ...)` of a file that does not find Fabric, and
// `Fabric::fabric` after `${TORCH_LIBRARIES}` (or `torch`) in each
// target_link_libraries that does not link it already, whichever file of an
// add_subdirectory tree they are in. Migrating twice changes nothing. A
// project that finds Torch nowhere, or links it nowhere, gets a note.
std::vector<BuildFileMigration> migrateCMakeProject(const std::vector<std::string>& texts);

// The CMakeLists.txt files that build `sources`: in each source's directory
// and every directory above it up to `root`. Build trees (a CMakeCache.txt
// beside them) are not sources.
std::vector<std::string> cmakeListsFor(const std::vector<std::string>& sources, const std::string& root);

}  // namespace fabricize
