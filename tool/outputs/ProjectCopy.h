// -o's complete copy of the project root: every file the migration does not
// write itself, so that the migrated tree runs as the original did (a class
// list beside the sources, configuration files, scripts, small assets).
//
// Not copied: version-control metadata (.git, .hg, .svn, .bzr), build
// folders (one holding CMakeCache.txt, or one the caller names) and, in an
// in-source build, what CMake and the compiler wrote beside the sources
// (CMakeFiles/, build.ninja, objects, programs). Files are
// copied with their permissions; a large file (1 MiB or more) is cloned
// where the file system can (a reflink shares the blocks, copy-on-write) and
// otherwise hard-linked (the same file under two names: a program that
// rewrites it in place changes the original; the summary says so). A folder
// of data (64 MiB or more, with no source, header or CMake file below it)
// becomes a symbolic link to the original folder. Symbolic links are copied
// as links. The original is only read.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace fabricize {

struct ProjectCopyRequest {
  std::string root;     // the project root (absolute)
  std::string outRoot;  // -o (absolute, outside root)
  // Absolute paths under root that the migration writes itself.
  std::set<std::string> written;
  // Absolute folders under root that are build outputs (the -p folder).
  std::vector<std::string> buildFolders;
};

struct ProjectCopySummary {
  size_t copied = 0, cloned = 0, hardLinked = 0, links = 0, skippedSpecial = 0;
  uint64_t bytesCopied = 0, bytesShared = 0;
  struct LinkedFolder {
    std::string relative;
    uint64_t bytes = 0;
  };
  std::vector<LinkedFolder> linkedFolders;
  // Relative paths (a folder's with a trailing /) of build outputs and
  // version-control metadata, not copied.
  std::vector<std::string> skipped;
};

// Copies as described above. False with `error` (which file, what failed)
// on the first failure; what was copied before stays.
bool copyProject(const ProjectCopyRequest& request, ProjectCopySummary& summary, std::string& error);

// One line for the user: what was copied, shared and linked ("" when there
// was nothing besides what the migration wrote).
std::string describeProjectCopy(const ProjectCopySummary& summary, const std::string& outRoot);

}  // namespace fabricize
