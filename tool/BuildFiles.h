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

// Edits for one CMakeLists.txt: `find_package(Fabric CONFIG REQUIRED)` on the
// line after `find_package(Torch ...)`, and `Fabric::fabric` after
// `${TORCH_LIBRARIES}` (or `torch`) in each target_link_libraries. A file that
// already finds Fabric gets nothing (migrating twice changes nothing); one
// that finds Torch but links it nowhere, or does not find Torch, gets a note.
BuildFileMigration migrateCMakeLists(const std::string& text);

// The CMakeLists.txt files that build `sources`: in each source's directory
// and every directory above it up to `root`. Build trees (a CMakeCache.txt
// beside them) are not sources.
std::vector<std::string> cmakeListsFor(const std::vector<std::string>& sources, const std::string& root);

}  // namespace fabricize
