#include "outputs/Output.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <fstream>
#include <sstream>

namespace fabricize {

namespace {
// The contents in a temporary file next to `path`, with the permissions of
// the file it will replace; `temp` names it. Empty on success.
std::string prepareFile(const std::string& path, const std::string& contents, llvm::SmallString<256>& temp) {
  llvm::StringRef parent = llvm::sys::path::parent_path(path);
  if (!parent.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(parent))
      return "cannot create directory " + parent.str() + ": " + ec.message();
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
  if (auto status = llvm::sys::fs::getPermissions(path)) llvm::sys::fs::setPermissions(temp, *status);
  return {};
}
}  // namespace

std::string writeFileAtomically(const std::string& path, const std::string& contents) {
  return writeFilesAtomically({{path, contents}});
}

std::string writeFilesAtomically(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<llvm::SmallString<256>> temps;
  for (const auto& [path, contents] : files) {
    llvm::SmallString<256> temp;
    std::string problem = prepareFile(path, contents, temp);
    if (!problem.empty()) {
      for (const auto& written : temps) llvm::sys::fs::remove(written);
      return problem;
    }
    temps.push_back(temp);
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (std::error_code ec = llvm::sys::fs::rename(temps[i], files[i].first)) {
      for (size_t j = i; j < files.size(); ++j) llvm::sys::fs::remove(temps[j]);
      return "cannot replace " + files[i].first + ": " + ec.message();
    }
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
