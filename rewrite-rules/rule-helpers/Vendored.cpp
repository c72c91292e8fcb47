#include "rule-helpers/Vendored.h"

#include "llvm/Support/Path.h"

#include <string>

namespace fabricize {

bool isVendoredFile(llvm::StringRef path, llvm::StringRef root, llvm::StringRef text) {
  llvm::StringRef relative = path;
  if (!root.empty() && relative.consume_front(root)) relative = relative.ltrim('/');
  for (auto part = llvm::sys::path::begin(relative), end = llvm::sys::path::end(relative); part != end; ++part) {
    if (std::next(part) == end) break;  // the file's own name
    std::string folder = part->lower();
    if (folder == "third_party" || folder == "third-party" || folder == "thirdparty" || folder == "3rdparty" ||
        folder == "3rd_party" || folder == "external" || folder == "externals" || folder == "extern" ||
        folder == "vendor" || folder == "vendored" || folder == "deps")
      return true;
  }
  if (text.count('\n') <= 300 || text.contains("<torch/") || text.contains("<ATen/") || text.contains("\"torch/") ||
      text.contains("<c10/"))
    return false;
  llvm::StringRef head = text.take_front(4000);
  for (const char* grant : {"Permission is hereby granted", "SPDX-License-Identifier", "Licensed under the",
                            "Redistribution and use in source and binary forms", "Boost Software License",
                            "GNU General Public License", "Mozilla Public License"})
    if (head.contains(grant)) return true;
  return false;
}

}  // namespace fabricize
