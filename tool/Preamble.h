// A document's own preamble (its #include lines and what they pull in:
// the project's headers), precompiled once and reused while edits leave it
// alone, as clangd does. It is chained on the LibTorch PCH (Pch.h): the
// preamble holds only what the PCH does not. Used by `fabricize lsp`, where
// the same file is analysed again at every edit; migrate and lint parse
// each file once and have no use for it.
#pragma once

#include "clang/Frontend/CompilerInvocation.h"
#include "clang/Frontend/PrecompiledPreamble.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/VirtualFileSystem.h"

#include <atomic>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace clang {
class CompilerInstance;
class Decl;
}  // namespace clang

namespace fabricize {

enum class PreambleUse { None, Built, Reused };

class PreambleCache {
 public:
  // The preamble of `invocation`'s main file holding `text`: the cached one
  // if the text's preamble region, the command, the LibTorch PCH and the
  // files it read are unchanged, else a new one. `otherBuffers` identifies
  // the unsaved text of the other open documents (an in-memory header has
  // no modification time to tell a change by). Null when the file has no
  // preamble, the build failed (the caller parses without one: errors are
  // its to report) or was cancelled.
  std::shared_ptr<const clang::PrecompiledPreamble> get(const clang::CompilerInvocation& invocation,
                                                        llvm::StringRef text,
                                                        llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> fs,
                                                        const std::string& otherBuffers,
                                                        const std::atomic<bool>* cancelled,
                                                        PreambleUse* use = nullptr);

 private:
  struct Entry {
    std::string mainFile;
    std::string key;  // the command, the LibTorch PCH's identity, the other buffers
    std::shared_ptr<const clang::PrecompiledPreamble> preamble;
  };
  std::mutex lock_;
  std::list<Entry> entries_;  // most recently used first
  // Status of the system headers the reuse checks have seen (SystemStatCache
  // in Preamble.cpp); emptied whenever a preamble is built.
  std::mutex statLock_;
  std::map<std::string, llvm::vfs::Status> systemStats_;
};

// The top-level declarations of the project's headers that a preamble
// holds. The parse that used the preamble never saw them (they were
// precompiled); rules that learn from headers (the threading facts, the
// members a trainer holds) must, so that an analysis with a preamble finds
// exactly what one without finds. Empty when `ci` used no preamble.
std::vector<clang::Decl*> preambleProjectDeclarations(clang::CompilerInstance& ci);

}  // namespace fabricize
