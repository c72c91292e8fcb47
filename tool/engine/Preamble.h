// A document's own preamble (its #include lines and what they pull in:
// the project's headers), precompiled once and reused while edits leave it
// alone, as clangd does. It is chained on the LibTorch PCH (Pch.h): the
// preamble holds only what the PCH does not. Used by `fabricize lsp`, where
// the same file is analysed again at every edit; migrate and lint parse
// each file once and have no use for it.
//
// Beyond clangd: while the user keeps typing inside one top-level
// declaration, the declarations above it are precompiled too (a
// declaration preamble), so that an edit in main() does not parse again the
// dataset and model classes above it, nor instantiate the LibTorch
// templates they use. Its boundary comes from the last clean parse of the
// document (noteDeclarations): the start of a top-level declaration that
// the edits since have left, with everything above it, alone.
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

// What an analysis used: a preamble built or reused, and how far it reaches.
struct PreambleReport {
  PreambleUse use = PreambleUse::None;
  // 0: the include lines only; else the declarations above this 1-based
  // line of the main file are precompiled too.
  unsigned declarationsAboveLine = 0;
  // Not 0: a declaration preamble above this line was tried and refused
  // (that part of the file does not compile on its own).
  unsigned refusedAboveLine = 0;
  double ms = 0;  // finding (and checking) or building it
};

// A top-level declaration of the main file: its first byte and the first
// byte of its last token.
struct DeclarationSpan {
  unsigned begin = 0;
  unsigned lastToken = 0;
};

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
                                                        PreambleReport* report = nullptr);

  // The top-level declarations a clean parse of `mainFile` holding `text`
  // found: where a later edit of the file may put a declaration preamble's
  // end.
  void noteDeclarations(const std::string& mainFile, std::string text, std::vector<DeclarationSpan> declarations);

 private:
  struct Entry {
    std::string mainFile;
    std::string key;            // the command, the LibTorch PCH's identity, the other buffers
    bool declarations = false;  // a declaration preamble (else the include lines only)
    std::shared_ptr<const clang::PrecompiledPreamble> preamble;
  };
  // What the last clean parse of a document found, and what the last
  // analyses wanted.
  struct Document {
    std::string text;
    std::vector<unsigned> boundaries;  // where a declaration preamble may end, in order
    unsigned lastBoundary = 0;         // the boundary the previous analysis wanted
    std::vector<std::string> refused;  // MD5s of prefixes whose preamble did not compile
  };
  // The boundary for `text`: 0, or the start of a top-level declaration
  // that the document's last clean parse found and that `text` keeps, with
  // all above it, unchanged.
  static unsigned boundaryFor(const Document& document, llvm::StringRef text, unsigned includeLinesEnd);
  std::shared_ptr<const clang::PrecompiledPreamble> build(const clang::CompilerInvocation& invocation,
                                                          const llvm::MemoryBuffer& buffer,
                                                          clang::PreambleBounds bounds,
                                                          llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> fs,
                                                          const std::atomic<bool>* cancelled);
  std::mutex lock_;
  std::list<Entry> entries_;  // most recently used first
  std::map<std::string, Document> documents_;
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
