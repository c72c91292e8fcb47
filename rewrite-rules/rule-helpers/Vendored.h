// Third-party code a project carries: never edited or reported on (the
// engine drops matches there), and a call into it that writes a file is
// made on rank zero (fabric-rank-zero-file).
#pragma once

#include "llvm/ADT/StringRef.h"

namespace fabricize {

// A file under a folder named as third-party code below `root` (the whole
// path when `root` is empty): third_party/, external/, vendor/, deps/...;
// or a single-header library copied in: over 300 lines, no LibTorch header
// read, a license grant at its top. `text` is the file's contents.
bool isVendoredFile(llvm::StringRef path, llvm::StringRef root, llvm::StringRef text);

}  // namespace fabricize
