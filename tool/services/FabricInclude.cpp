#include "services/FabricInclude.h"

#include "outputs/Output.h"
#include "inputs/Project.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace fabricize {

std::vector<std::string> quotedIncludes(const std::string& path, const std::string& text) {
  std::vector<std::string> headers;
  std::string dir = llvm::sys::path::parent_path(path).str();
  size_t at = 0;
  while ((at = text.find("#include", at)) != std::string::npos) {
    size_t lineEnd = text.find('\n', at);
    std::string line = text.substr(at, lineEnd == std::string::npos ? std::string::npos : lineEnd - at);
    at += 8;
    size_t open = line.find('"');
    size_t close = open == std::string::npos ? open : line.find('"', open + 1);
    if (close == std::string::npos) continue;
    llvm::SmallString<256> header(dir);
    llvm::sys::path::append(header, line.substr(open + 1, close - open - 1));
    if (llvm::sys::fs::is_regular_file(header)) headers.push_back(absolutePath(std::string(header)));
  }
  return headers;
}

std::map<std::string, RenderedFile> renderMigration(const std::map<std::string, FileResult>& files,
                                                    const std::string& root,
                                                    const std::map<std::string, std::string>& unsaved,
                                                    const IncludeGraph& includesOf) {
  std::map<std::string, RenderedFile> rendered;
  std::map<std::string, bool> bringsFabric;  // path -> its migrated text includes the runtime
  std::function<bool(const std::string&)> providesFabric = [&](const std::string& path) -> bool {
    if (auto known = bringsFabric.find(path); known != bringsFabric.end()) return known->second;
    bringsFabric[path] = false;  // an include cycle ends here
    auto file = files.find(path);
    std::string text;
    if (file != files.end()) {
      text = file->second.original;
    } else if (auto buffer = unsaved.find(path); buffer != unsaved.end()) {
      text = buffer->second;
    } else if (!readFile(path, text)) {
      return false;
    }
    bool through = false;
    for (const std::string& header : includesOf ? includesOf(path, text) : quotedIncludes(path, text))
      if (isUnderOrEqual(header, root) && providesFabric(header)) through = true;
    bool provides = through;
    if (file != files.end()) {
      RenderedFile r;
      r.text = renderFixed(file->second.original, file->second.edits, file->second.wantsInclude, &r.merged.conflicts,
                           &r.merged.edits, through);
      provides = provides || r.text.find("<fabric/fabric.h>") != std::string::npos;
      rendered[path] = std::move(r);
    } else {
      provides = provides || text.find("<fabric/fabric.h>") != std::string::npos;
    }
    return bringsFabric[path] = provides;
  };
  for (const auto& [path, file] : files) providesFabric(path);
  return rendered;
}

}  // namespace fabricize
