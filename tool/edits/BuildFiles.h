// The project's build files: a CMakeLists.txt that builds a LibTorch program
// gains find_package(Fabric) and links Fabric::fabric wherever it links
// LibTorch, so the migrated sources build against the runtime.
#pragma once

#include "edits/EditSet.h"

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

// A command invocation that brings LibTorch to targets without the runtime,
// as CMake's codemodel records it (CMakeFileApi.h).
struct LibTorchLinkSite {
  std::string file;  // one of the project's CMake files, absolute
  unsigned line = 0;
  std::vector<std::string> targets;
  bool onlyExecutables = false;  // nothing links those targets: the runtime need not propagate
};
struct LibTorchLinks {
  std::vector<LibTorchLinkSite> sites;  // where the runtime is still to be linked
  size_t libTorchTargets = 0;           // targets that link LibTorch, with the runtime or not
};

// Edits for all the CMake files of one project at once (paths[0] is the
// top-level CMakeLists.txt; the result is parallel to `paths` and `texts`):
// `find_package(Fabric CONFIG REQUIRED)` on the line after each
// `find_package(Torch ...)` of a file that does not find Fabric (imported
// targets are scoped to the directory that finds them), and Fabric::fabric
// linked wherever LibTorch is:
//  - with `links` (what CMake evaluated), in each of those commands, next to
//    the argument that names LibTorch when one does (its visibility), else at
//    the end (PUBLIC in a keyword signature): a link list in a variable, a
//    function, link_libraries, a generator expression;
//  - without, after `${TORCH_LIBRARIES}` (or `torch`) in each
//    target_link_libraries and link_libraries that spells it.
// Migrating twice changes nothing. A project that finds Torch nowhere, links
// it nowhere, or links it where no edit can go, gets a note.
std::vector<BuildFileMigration> migrateCMakeProject(const std::vector<std::string>& paths,
                                                    const std::vector<std::string>& texts,
                                                    const LibTorchLinks* links = nullptr);

// The CMakeLists.txt files that build `sources`: in each source's directory
// and every directory above it up to `root`. Build trees (a CMakeCache.txt
// beside them) are not sources.
std::vector<std::string> cmakeListsFor(const std::vector<std::string>& sources, const std::string& root);

}  // namespace fabricize
