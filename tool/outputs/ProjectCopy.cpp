#include "outputs/ProjectCopy.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace fabricize {
namespace {

constexpr uint64_t kLargeFileBytes = 1ull << 20;    // cloned or hard-linked from here on
constexpr uint64_t kDataFolderBytes = 64ull << 20;  // a data folder from here on is linked
const char* const kVersionControl[] = {".git", ".hg", ".svn", ".bzr"};

std::string failure(const std::string& what, const std::string& path) {
  return "cannot " + what + " " + path + ": " + std::strerror(errno);
}

bool isVersionControl(const std::string& name) {
  return std::any_of(std::begin(kVersionControl), std::end(kVersionControl),
                     [&](const char* vcs) { return name == vcs; });
}

// What makes a folder part of the project's code rather than data.
bool isProjectFile(const std::string& name) {
  static const char* const kExtensions[] = {".c",   ".cc",  ".cpp", ".cxx", ".c++", ".h",   ".hh",  ".hpp",  ".hxx",
                                            ".h++", ".inl", ".ipp", ".cu",  ".cuh", ".tcc", ".txx", ".cmake"};
  if (name == "CMakeLists.txt") return true;
  const auto dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  const std::string extension = name.substr(dot);
  return std::any_of(std::begin(kExtensions), std::end(kExtensions),
                     [&](const char* known) { return extension == known; });
}

std::vector<std::string> entriesOf(const std::string& folder, std::string& error) {
  std::vector<std::string> names;
  DIR* dir = ::opendir(folder.c_str());
  if (dir == nullptr) {
    error = failure("read the folder", folder);
    return names;
  }
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

struct FolderStats {
  uint64_t bytes = 0;
  bool holdsProjectFiles = false;
};

// Sizes below `folder`, stopping at the first source, header or CMake file
// (such a folder is copied, whatever its size). Links are not followed.
void addStats(const std::string& folder, FolderStats& stats) {
  std::string ignored;
  for (const std::string& name : entriesOf(folder, ignored)) {
    if (stats.holdsProjectFiles) return;
    const std::string path = folder + "/" + name;
    struct stat info{};
    if (::lstat(path.c_str(), &info) != 0) continue;
    if (S_ISDIR(info.st_mode)) {
      addStats(path, stats);
    } else if (S_ISREG(info.st_mode)) {
      stats.holdsProjectFiles = isProjectFile(name);
      stats.bytes += static_cast<uint64_t>(info.st_size);
    }
  }
}

// What CMake writes into the folders of an in-source build (the project's
// root holds CMakeCache.txt), beside the sources.
bool isInSourceBuildOutput(const std::string& name, const std::string& path) {
  static const char* const kGenerated[] = {
      "CMakeCache.txt",        "CMakeFiles",          "cmake_install.cmake",  "build.ninja",
      "rules.ninja",           ".ninja_deps",         ".ninja_log",           "Makefile",
      "compile_commands.json", "CTestTestfile.cmake", "install_manifest.txt", "Testing"};
  if (std::any_of(std::begin(kGenerated), std::end(kGenerated),
                  [&](const char* generated) { return name == generated; }))
    return true;
  for (const char* extension : {".o", ".a", ".so"}) {
    const size_t length = std::strlen(extension);
    if (name.size() > length && name.compare(name.size() - length, length, extension) == 0) return true;
  }
  // A program the build linked.
  static const char kElfMagic[4] = {'\x7f', 'E', 'L', 'F'};
  char magic[4] = {};
  const int file = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file < 0) return false;
  const bool elf = ::read(file, magic, sizeof magic) == 4 && std::memcmp(magic, kElfMagic, 4) == 0;
  ::close(file);
  return elf;
}

class Copier {
 public:
  Copier(const ProjectCopyRequest& request, ProjectCopySummary& summary) : request_(request), summary_(summary) {
    struct stat info{};
    inSourceBuild_ = ::stat((request.root + "/CMakeCache.txt").c_str(), &info) == 0;
  }

  bool copyFolder(const std::string& relative, std::string& error) {
    const std::string source = join(request_.root, relative);
    const std::string target = join(request_.outRoot, relative);
    struct stat info{};
    if (::stat(source.c_str(), &info) != 0) {
      error = failure("read", source);
      return false;
    }
    if (!makeFolder(target, info.st_mode & 07777, error)) return false;
    const std::vector<std::string> names = entriesOf(source, error);
    if (!error.empty()) return false;
    for (const std::string& name : names) {
      const std::string childRelative = relative.empty() ? name : relative + "/" + name;
      const std::string path = source + "/" + name;
      struct stat entry{};
      if (::lstat(path.c_str(), &entry) != 0) {
        error = failure("read", path);
        return false;
      }
      bool done = true;
      if (inSourceBuild_ && (S_ISDIR(entry.st_mode) || S_ISREG(entry.st_mode)) && isInSourceBuildOutput(name, path)) {
        summary_.skipped.push_back(childRelative + (S_ISDIR(entry.st_mode) ? "/" : ""));
      } else if (S_ISDIR(entry.st_mode)) {
        done = copySubfolder(childRelative, path, name, error);
      } else if (S_ISLNK(entry.st_mode)) {
        done = copyLink(path, join(request_.outRoot, childRelative), error);
      } else if (S_ISREG(entry.st_mode)) {
        if (name == ".git") {  // a submodule's or work tree's pointer to its repository
          summary_.skipped.push_back(childRelative);
        } else if (!request_.written.count(path)) {
          done = copyFile(path, join(request_.outRoot, childRelative), entry, error);
        }
      } else {
        ++summary_.skippedSpecial;  // a socket, a FIFO, a device: nothing a build reads
      }
      if (!done) return false;
    }
    return true;
  }

 private:
  static std::string join(const std::string& base, const std::string& relative) {
    return relative.empty() ? base : base + "/" + relative;
  }

  bool isBuildFolder(const std::string& path) const {
    struct stat info{};
    if (::stat((path + "/CMakeCache.txt").c_str(), &info) == 0) return true;
    return std::find(request_.buildFolders.begin(), request_.buildFolders.end(), path) != request_.buildFolders.end();
  }

  bool copySubfolder(const std::string& relative, const std::string& path, const std::string& name,
                     std::string& error) {
    if (isVersionControl(name) || isBuildFolder(path)) {
      summary_.skipped.push_back(relative + "/");
      return true;
    }
    FolderStats stats;
    addStats(path, stats);
    const std::string target = join(request_.outRoot, relative);
    struct stat existing{};
    const bool targetIsFolder = ::lstat(target.c_str(), &existing) == 0 && S_ISDIR(existing.st_mode);
    // A data folder: linked whole, unless an earlier run made a real folder
    // there (then its files are shared one by one, below).
    if (!stats.holdsProjectFiles && stats.bytes >= kDataFolderBytes && !targetIsFolder) {
      if (!replaceWithLink(path, target, error)) return false;
      summary_.linkedFolders.push_back({relative, stats.bytes});
      return true;
    }
    return copyFolder(relative, error);
  }

  bool makeFolder(const std::string& path, mode_t mode, std::string& error) {
    struct stat info{};
    if (::lstat(path.c_str(), &info) == 0) {
      if (S_ISDIR(info.st_mode)) return true;
      error = path + " exists and is not a folder: move it away, or choose another -o";
      return false;
    }
    // Parents first (the output root itself may not exist yet).
    const auto slash = path.rfind('/');
    if (slash != std::string::npos && slash > 0 && !makeFolder(path.substr(0, slash), 0777, error)) return false;
    if (::mkdir(path.c_str(), mode | S_IRWXU) != 0 && errno != EEXIST) {
      error = failure("create the folder", path);
      return false;
    }
    return true;
  }

  // A new name appears in one step (rename), whatever was there before.
  bool replaceWithLink(const std::string& linkTarget, const std::string& path, std::string& error) {
    const std::string temporary = path + ".fabricize-link";
    ::unlink(temporary.c_str());
    if (::symlink(linkTarget.c_str(), temporary.c_str()) != 0 || ::rename(temporary.c_str(), path.c_str()) != 0) {
      error = failure("create the link", path);
      ::unlink(temporary.c_str());
      return false;
    }
    return true;
  }

  bool copyLink(const std::string& source, const std::string& target, std::string& error) {
    std::string linkTarget(4096, '\0');
    const ssize_t length = ::readlink(source.c_str(), linkTarget.data(), linkTarget.size());
    if (length < 0) {
      error = failure("read the link", source);
      return false;
    }
    linkTarget.resize(static_cast<size_t>(length));
    if (!replaceWithLink(linkTarget, target, error)) return false;
    ++summary_.links;
    return true;
  }

  bool copyFile(const std::string& source, const std::string& target, const struct stat& info, std::string& error) {
    const auto bytes = static_cast<uint64_t>(info.st_size);
    struct stat existing{};
    if (::stat(target.c_str(), &existing) == 0 && existing.st_dev == info.st_dev && existing.st_ino == info.st_ino) {
      ++summary_.hardLinked;  // an earlier run's link: already the same file
      summary_.bytesShared += bytes;
      return true;
    }
    // Written beside the target, then renamed over it: never half a file.
    const std::string temporary = target + ".fabricize-tmp";
    ::unlink(temporary.c_str());
    const mode_t mode = info.st_mode & 07777;
    enum { Copied, Cloned, Linked } how = Copied;
    if (bytes >= kLargeFileBytes) {
      if (clone(source, temporary, mode))
        how = Cloned;
      else if (::link(source.c_str(), temporary.c_str()) == 0)
        how = Linked;
    }
    if (how == Copied && !copyContents(source, temporary, mode, error)) {
      ::unlink(temporary.c_str());
      return false;
    }
    if (::rename(temporary.c_str(), target.c_str()) != 0) {
      error = failure("write", target);
      ::unlink(temporary.c_str());
      return false;
    }
    if (how == Copied) {
      ++summary_.copied;
      summary_.bytesCopied += bytes;
    } else {
      ++(how == Cloned ? summary_.cloned : summary_.hardLinked);
      summary_.bytesShared += bytes;
    }
    return true;
  }

  // A reflink (the blocks shared, copy-on-write): btrfs, XFS, bcachefs.
  static bool clone(const std::string& source, const std::string& temporary, mode_t mode) {
    const int from = ::open(source.c_str(), O_RDONLY | O_CLOEXEC);
    if (from < 0) return false;
    const int to = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode & 0777);
    bool ok = to >= 0 && ::ioctl(to, FICLONE, from) == 0 && ::fchmod(to, mode) == 0;
    if (to >= 0) ok = ::close(to) == 0 && ok;
    ::close(from);
    if (!ok) ::unlink(temporary.c_str());
    return ok;
  }

  static bool copyContents(const std::string& source, const std::string& temporary, mode_t mode, std::string& error) {
    const int from = ::open(source.c_str(), O_RDONLY | O_CLOEXEC);
    if (from < 0) {
      error = failure("read", source);
      return false;
    }
    const int to = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode & 0777);
    if (to < 0) {
      error = failure("write", temporary);
      ::close(from);
      return false;
    }
    char buffer[1 << 16];
    bool ok = true;
    for (;;) {
      const ssize_t got = ::read(from, buffer, sizeof buffer);
      if (got == 0) break;
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        error = failure("read", source);
        ok = false;
        break;
      }
      for (ssize_t at = 0; ok && at < got;) {
        const ssize_t put = ::write(to, buffer + at, static_cast<size_t>(got - at));
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) {
          error = failure("write", temporary);
          ok = false;
        }
        at += put > 0 ? put : 0;
      }
      if (!ok) break;
    }
    // The source's permissions (a script stays executable), whatever the umask.
    if (ok && ::fchmod(to, mode) != 0) {
      error = failure("set the permissions of", temporary);
      ok = false;
    }
    if (::close(to) != 0 && ok) {
      error = failure("write", temporary);
      ok = false;
    }
    ::close(from);
    return ok;
  }

  const ProjectCopyRequest& request_;
  ProjectCopySummary& summary_;
  bool inSourceBuild_ = false;
};

std::string sizeText(uint64_t bytes) {
  char text[32];
  if (bytes >= (1ull << 30))
    std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  else if (bytes >= (1ull << 20))
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1ull << 20));
  else
    std::snprintf(text, sizeof text, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  return text;
}

}  // namespace

bool copyProject(const ProjectCopyRequest& request, ProjectCopySummary& summary, std::string& error) {
  return Copier(request, summary).copyFolder("", error);
}

std::string describeProjectCopy(const ProjectCopySummary& summary, const std::string& outRoot) {
  if (summary.copied + summary.cloned + summary.hardLinked + summary.links + summary.skippedSpecial == 0 &&
      summary.linkedFolders.empty() && summary.skipped.empty())
    return "";  // the migration wrote every file there is
  std::string text = "fabricize: " + outRoot +
                     ": the project's other files as they are: " + std::to_string(summary.copied) + " copied (" +
                     sizeText(summary.bytesCopied) + ")";
  const auto largeFiles = [](size_t count) {
    return ", " + std::to_string(count) + (count == 1 ? " large file " : " large files ");
  };
  if (summary.cloned) text += largeFiles(summary.cloned) + "cloned (copy-on-write)";
  if (summary.hardLinked)
    text += largeFiles(summary.hardLinked) +
            "hard-linked (one file under two names: rewriting it in place changes the original)";
  if (summary.links) text += ", " + std::to_string(summary.links) + " symbolic links";
  for (const auto& folder : summary.linkedFolders)
    text += "; data folder " + folder.relative + "/ (" + sizeText(folder.bytes) +
            ") linked, not copied: it is the original folder";
  if (!summary.skipped.empty()) {
    text += "; not copied (build output, version control):";
    const size_t shown = std::min<size_t>(summary.skipped.size(), 8);
    for (size_t i = 0; i < shown; ++i) text += " " + summary.skipped[i];
    if (summary.skipped.size() > shown) text += " and " + std::to_string(summary.skipped.size() - shown) + " more";
  }
  if (summary.skippedSpecial) text += "; " + std::to_string(summary.skippedSpecial) + " sockets/FIFOs/devices skipped";
  return text;
}

}  // namespace fabricize
