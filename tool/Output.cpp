#include "Output.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <fstream>
#include <sstream>

namespace fabricize {

std::string writeFileAtomically(const std::string& path, const std::string& contents) {
  llvm::StringRef parent = llvm::sys::path::parent_path(path);
  if (!parent.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(parent))
      return "cannot create directory " + parent.str() + ": " + ec.message();
  llvm::SmallString<256> temp;
  int fd = -1;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(path + ".fabricize-%%%%%%", fd, temp))
    return "cannot write next to " + path + ": " + ec.message();
  {
    llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
    out << contents;
    out.flush();
    if (out.has_error()) {
      std::string message = out.error().message();
      out.clear_error();
      llvm::sys::fs::remove(temp);
      return "cannot write " + path + ": " + message;
    }
  }
  // Keep the permissions of a file being replaced (in-place edits).
  if (auto status = llvm::sys::fs::getPermissions(path))
    llvm::sys::fs::setPermissions(temp, *status);
  if (std::error_code ec = llvm::sys::fs::rename(temp, path)) {
    llvm::sys::fs::remove(temp);
    return "cannot replace " + path + ": " + ec.message();
  }
  return {};
}

bool readFile(const std::string& path, std::string& contents) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  contents = buffer.str();
  return true;
}

}  // namespace fabricize
