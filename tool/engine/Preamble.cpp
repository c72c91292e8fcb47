#include "engine/Preamble.h"

#include "utilities/StableOrder.h"

#include "clang/AST/DeclTemplate.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Lex/HeaderSearchOptions.h"
#include "clang/Serialization/ASTReader.h"
#include "clang/Serialization/ModuleFile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MD5.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <map>
#include <optional>

namespace fabricize {

using namespace clang;

namespace {

// Open documents kept with a preamble; the least recently analysed goes.
constexpr size_t kMaxPreambles = 8;

// The preamble parses the project's headers as the analysis would: function
// bodies of system headers (LibTorch's) skipped, the project's kept, since
// rules match inside a header's inline functions.
class SkipSystemBodies : public PreambleCallbacks {
 public:
  explicit SkipSystemBodies(const std::atomic<bool>* cancelled) : cancelled_(cancelled) {}
  void BeforeExecute(CompilerInstance& ci) override { sm_ = &ci.getSourceManager(); }
  bool shouldSkipFunctionBody(Decl* d) override {
    if (cancelled_ && cancelled_->load(std::memory_order_relaxed)) return true;  // discarded anyway
    return sm_ && sm_->isInSystemHeader(sm_->getExpansionLoc(d->getLocation()));
  }

 private:
  const std::atomic<bool>* cancelled_;
  const SourceManager* sm_ = nullptr;
};

// What else a preamble depends on besides its text and files: the command
// (flags, include folders, the -include-pch it is chained on), that PCH's
// file (a rebuilt LibTorch PCH orphans every preamble chained on it),
// and the other open buffers.
std::string keyFor(const CompilerInvocation& invocation, const std::string& otherBuffers) {
  std::string key;
  invocation.generateCC1CommandLine([&](const llvm::Twine& arg) {
    key += arg.str();
    key += '\0';
  });
  const std::string& pch = invocation.getPreprocessorOpts().ImplicitPCHInclude;
  llvm::sys::fs::file_status status;
  // Its file, not its time (the PCH cache touches a PCH it uses, hourly): a
  // rebuilt one is renamed into place, a new file.
  if (!pch.empty() && !llvm::sys::fs::status(pch, status))
    key += std::to_string(status.getUniqueID().getDevice()) + ":" + std::to_string(status.getUniqueID().getFile()) +
           ":" + std::to_string(status.getSize());
  key += '\0';
  key += otherBuffers;
  return key;
}

// The reuse check stats every file a preamble depends on: with the LibTorch
// PCH under it, LibTorch's and the standard library's thousands of headers,
// at every edit (10-15 ms). Files in the command's system folders are
// stat'ed once per preamble built instead, as Clang itself does not check
// system headers when it loads a PCH (-fvalidate-system-inputs is off by
// default); the project's own files are stat'ed at every check.
class SystemStatCache : public llvm::vfs::ProxyFileSystem {
 public:
  SystemStatCache(llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> fs, std::vector<std::string> systemDirs,
                  std::mutex& lock, std::map<std::string, llvm::vfs::Status>& cache)
      : ProxyFileSystem(std::move(fs)), systemDirs_(std::move(systemDirs)), lock_(lock), cache_(cache) {}

  llvm::ErrorOr<llvm::vfs::Status> status(const llvm::Twine& path) override {
    std::string name = path.str();
    bool system = std::any_of(systemDirs_.begin(), systemDirs_.end(),
                              [&](const std::string& dir) { return llvm::StringRef(name).starts_with(dir); });
    if (!system) return ProxyFileSystem::status(path);
    {
      std::lock_guard<std::mutex> hold(lock_);
      auto known = cache_.find(name);
      if (known != cache_.end()) return known->second;
    }
    llvm::ErrorOr<llvm::vfs::Status> result = ProxyFileSystem::status(path);
    if (result) {
      std::lock_guard<std::mutex> hold(lock_);
      cache_.emplace(name, *result);
    }
    return result;
  }

 private:
  std::vector<std::string> systemDirs_;
  std::mutex& lock_;
  std::map<std::string, llvm::vfs::Status>& cache_;
};

// The command's system include folders (-isystem, the standard library's,
// Clang's own), each ending in '/'.
std::vector<std::string> systemDirsOf(const CompilerInvocation& invocation) {
  std::vector<std::string> dirs;
  const HeaderSearchOptions& search = invocation.getHeaderSearchOpts();
  for (const HeaderSearchOptions::Entry& entry : search.UserEntries)
    if (entry.Group >= frontend::System && !entry.Path.empty()) dirs.push_back(entry.Path);
  if (!search.ResourceDir.empty()) dirs.push_back(search.ResourceDir);
  for (std::string& dir : dirs)
    if (dir.back() != '/') dir += '/';
  return dirs;
}

}  // namespace

std::shared_ptr<const PrecompiledPreamble> PreambleCache::get(
    const CompilerInvocation& invocation, llvm::StringRef text, llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> fs,
    const std::string& otherBuffers, const std::atomic<bool>* cancelled, PreambleReport* report) {
  if (invocation.getFrontendOpts().Inputs.size() != 1) return nullptr;
  const std::string mainFile = invocation.getFrontendOpts().Inputs[0].getFile().str();
  std::unique_ptr<llvm::MemoryBuffer> buffer = llvm::MemoryBuffer::getMemBufferCopy(text, mainFile);
  PreambleBounds includeLines = ComputePreambleBounds(invocation.getLangOpts(), buffer->getMemBufferRef(), 0);
  if (includeLines.Size == 0) return nullptr;
  const std::string key = keyFor(invocation, otherBuffers);
  auto lineOf = [&](unsigned offset) { return 1 + static_cast<unsigned>(text.take_front(offset).count('\n')); };
  auto reused = [&](const Entry& entry) {
    if (report) {
      report->use = PreambleUse::Reused;
      report->declarationsAboveLine = entry.declarations ? lineOf(entry.preamble->getBounds().Size) : 0;
    }
    return entry.preamble;
  };

  unsigned boundary = 0;  // where a declaration preamble would end; 0: none
  bool settled = false;   // the previous analysis wanted the same: the user types there
  std::string prefixHash;
  std::optional<Entry> reusable;  // the longest preamble this text can reuse
  {
    SystemStatCache stats(fs, systemDirsOf(invocation), statLock_, systemStats_);
    std::lock_guard<std::mutex> hold(lock_);
    auto known = documents_.find(mainFile);
    if (known != documents_.end()) {
      Document& document = known->second;
      boundary = boundaryFor(document, text, includeLines.Size);
      settled = boundary != 0 && boundary == document.lastBoundary;
      document.lastBoundary = boundary;
      if (boundary) {
        // With the key: the same text may compile once a header is fixed.
        prefixHash =
            llvm::MD5::hash(llvm::arrayRefFromStringRef(key + text.take_front(boundary).str())).digest().str().str();
        if (std::find(document.refused.begin(), document.refused.end(), prefixHash) != document.refused.end())
          boundary = 0, settled = false;  // it did not compile: not tried again
      }
    }
    // The longest preamble this text can reuse. A declaration preamble that
    // ends above `boundary` is replaced once the user settles there.
    Entry* best = nullptr;
    for (Entry& entry : entries_) {
      if (entry.mainFile != mainFile || entry.key != key) continue;
      PreambleBounds bounds = entry.declarations ? entry.preamble->getBounds() : includeLines;
      if (bounds.Size > text.size() || !entry.preamble->CanReuse(invocation, buffer->getMemBufferRef(), bounds, stats))
        continue;
      if (!best || bounds.Size > best->preamble->getBounds().Size) best = &entry;
    }
    if (best) reusable = *best;
    bool wantsNew = settled && (!best || !best->declarations || best->preamble->getBounds().Size != boundary);
    if (best && !wantsNew) {
      for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (&*it == best) entries_.splice(entries_.begin(), entries_, it);
      return reused(entries_.front());
    }
  }

  if (settled) {
    bool endsLine = boundary == 0 || text[boundary - 1] == '\n';
    auto preamble = build(invocation, *buffer, PreambleBounds(boundary, endsLine), fs, cancelled);
    if (cancelled && cancelled->load()) return nullptr;
    std::lock_guard<std::mutex> hold(lock_);
    if (preamble) {
      entries_.remove_if([&](const Entry& e) { return e.mainFile == mainFile && e.declarations; });
      entries_.push_front({mainFile, key, true, preamble});
      if (entries_.size() > 2 * kMaxPreambles) entries_.pop_back();
      if (report) *report = {PreambleUse::Built, lineOf(boundary)};
      return preamble;
    }
    // The part above the boundary does not compile on its own (a header open
    // in the editor broke it; an attribute the boundary cut from its
    // declaration): the preamble this text could reuse serves, and this
    // text is not tried again.
    std::vector<std::string>& refused = documents_[mainFile].refused;
    refused.push_back(prefixHash);
    if (refused.size() > 16) refused.erase(refused.begin());
    if (report) report->refusedAboveLine = lineOf(boundary);
    if (reusable) return reused(*reusable);
  }

  auto preamble = build(invocation, *buffer, includeLines, fs, cancelled);
  std::lock_guard<std::mutex> hold(lock_);
  if (!preamble || (cancelled && cancelled->load())) return nullptr;
  if (report) {
    report->use = PreambleUse::Built;
    report->declarationsAboveLine = 0;
  }
  entries_.remove_if([&](const Entry& e) { return e.mainFile == mainFile && !e.declarations; });
  entries_.push_front({mainFile, key, false, preamble});
  if (entries_.size() > 2 * kMaxPreambles) entries_.pop_back();
  // The documents kept: those with a preamble.
  for (auto it = documents_.begin(); it != documents_.end();)
    it = std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.mainFile == it->first; })
             ? std::next(it)
             : documents_.erase(it);
  return preamble;
}

std::shared_ptr<const PrecompiledPreamble> PreambleCache::build(const CompilerInvocation& invocation,
                                                                const llvm::MemoryBuffer& buffer, PreambleBounds bounds,
                                                                llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> fs,
                                                                const std::atomic<bool>* cancelled) {
  {
    std::lock_guard<std::mutex> hold(statLock_);
    systemStats_.clear();  // what this preamble reads is stat'ed afresh
  }
  // Built outside the lock: another document's analysis goes on meanwhile.
  IgnoringDiagConsumer quiet;
  llvm::IntrusiveRefCntPtr<DiagnosticsEngine> diagnostics =
      CompilerInstance::createDiagnostics(new DiagnosticOptions, &quiet, /*ShouldOwnClient=*/false);
  CompilerInvocation preambleInvocation(invocation);
  preambleInvocation.getFrontendOpts().SkipFunctionBodies = true;  // asks SkipSystemBodies
  SkipSystemBodies callbacks(cancelled);
  llvm::ErrorOr<PrecompiledPreamble> built =
      PrecompiledPreamble::Build(preambleInvocation, &buffer, bounds, *diagnostics, fs,
                                 std::make_shared<PCHContainerOperations>(), /*StoreInMemory=*/false,
                                 /*StoragePath=*/"", callbacks);
  // Clang writes a preamble with errors too (clangd shows them); the
  // analysis needs one that compiled, and reports the errors itself.
  if (!built || diagnostics->hasErrorOccurred() || (cancelled && cancelled->load())) return nullptr;
  return std::make_shared<const PrecompiledPreamble>(std::move(*built));
}

void PreambleCache::noteDeclarations(const std::string& mainFile, std::string text,
                                     std::vector<DeclarationSpan> declarations) {
  // Where a preamble may end: the starts of declarations that are not
  // inside another (`typedef struct {...} Name;` holds a struct's
  // declaration that starts after the typedef's), in order.
  std::sort(declarations.begin(), declarations.end(),
            [](const DeclarationSpan& a, const DeclarationSpan& b) { return a.begin < b.begin; });
  std::vector<unsigned> boundaries;
  bool any = false;
  unsigned reach = 0;  // the furthest last token of the declarations that start before
  for (size_t i = 0; i < declarations.size();) {
    unsigned begin = declarations[i].begin;
    if (!any || begin > reach) boundaries.push_back(begin);
    // Declarations that start together (`int a, b;`, one macro's) end no
    // preamble inside each other.
    for (; i < declarations.size() && declarations[i].begin == begin; ++i)
      reach = std::max(reach, declarations[i].lastToken);
    any = true;
  }
  std::lock_guard<std::mutex> hold(lock_);
  Document& document = documents_[mainFile];
  document.text = std::move(text);
  document.boundaries = std::move(boundaries);
}

unsigned PreambleCache::boundaryFor(const Document& document, llvm::StringRef text, unsigned includeLinesEnd) {
  size_t same = 0;  // bytes the text shares with the one the boundaries are of
  size_t most = std::min(text.size(), document.text.size());
  while (same < most && text[same] == document.text[same]) ++same;
  // The last boundary the edits left alone, with a declaration below the
  // include lines above it (else the include lines' preamble is as good).
  const std::vector<unsigned>& b = document.boundaries;
  auto first = std::lower_bound(b.begin(), b.end(), includeLinesEnd);
  auto last = std::upper_bound(first, b.end(), static_cast<unsigned>(same));
  return last - first >= 2 ? *std::prev(last) : 0;
}

std::vector<Decl*> preambleProjectDeclarations(CompilerInstance& ci) {
  std::vector<Decl*> declarations;
  IntrusiveRefCntPtr<ASTReader> reader = ci.getASTReader();
  if (!reader || !ci.hasSourceManager()) return declarations;
  SourceManager& sm = ci.getSourceManager();
  for (serialization::ModuleFile& module : reader->getModuleManager()) {
    if (module.Kind != serialization::MK_Preamble) continue;
    // The preamble's own source entries (not the LibTorch PCH's): the files
    // it parsed. Loaded entry IDs run from SLocEntryBaseID upwards; the
    // source manager indexes them by -ID - 2.
    for (unsigned i = 0; i < module.LocalNumSLocEntries; ++i) {
      int id = module.SLocEntryBaseID + static_cast<int>(i);
      bool invalid = false;
      const SrcMgr::SLocEntry& entry = sm.getLoadedSLocEntry(static_cast<unsigned>(-id - 2), &invalid);
      if (invalid || !entry.isFile() || entry.getFile().getFileCharacteristic() != SrcMgr::C_User) continue;
      FileID file = sm.getFileID(SourceLocation::getFromRawEncoding(entry.getOffset()));
      if (file.isInvalid() || file == sm.getMainFileID()) continue;
      llvm::SmallVector<Decl*, 32> found;
      reader->FindFileRegionDecls(file, 0, sm.getFileIDSize(file), found);
      for (Decl* d : found) {
        // What the parse would have handed the consumer: the file's own
        // top-level declarations, not Sema's instantiations of them.
        if (!d || d->isImplicit() || !d->getLexicalDeclContext()->isTranslationUnit()) continue;
        if (const auto* spec = dyn_cast<ClassTemplateSpecializationDecl>(d);
            spec && !spec->isExplicitInstantiationOrSpecialization())
          continue;
        if (const auto* function = dyn_cast<FunctionDecl>(d);
            function && function->getTemplateSpecializationKind() == TSK_ImplicitInstantiation)
          continue;
        if (std::find(declarations.begin(), declarations.end(), d) == declarations.end()) declarations.push_back(d);
      }
    }
  }
  // In the order a parse meets them (a header's own includes come in the
  // middle of it), as the consumer would have received them.
  stableSort(declarations, [&](Decl* a, Decl* b) {
    return sm.isBeforeInTranslationUnit(sm.getFileLoc(a->getLocation()), sm.getFileLoc(b->getLocation()));
  });
  return declarations;
}

}  // namespace fabricize
