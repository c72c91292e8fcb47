#include "Preamble.h"

#include "clang/AST/DeclTemplate.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Lex/HeaderSearchOptions.h"
#include "clang/Serialization/ASTReader.h"
#include "clang/Serialization/ModuleFile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <map>

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
    key += std::to_string(status.getUniqueID().getDevice()) + ":" +
           std::to_string(status.getUniqueID().getFile()) + ":" + std::to_string(status.getSize());
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

std::shared_ptr<const PrecompiledPreamble> PreambleCache::get(const CompilerInvocation& invocation,
                                                              llvm::StringRef text,
                                                              llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> fs,
                                                              const std::string& otherBuffers,
                                                              const std::atomic<bool>* cancelled,
                                                              PreambleUse* use) {
  if (invocation.getFrontendOpts().Inputs.size() != 1) return nullptr;
  const std::string mainFile = invocation.getFrontendOpts().Inputs[0].getFile().str();
  std::unique_ptr<llvm::MemoryBuffer> buffer = llvm::MemoryBuffer::getMemBufferCopy(text, mainFile);
  PreambleBounds bounds = ComputePreambleBounds(invocation.getLangOpts(), buffer->getMemBufferRef(), 0);
  if (bounds.Size == 0) return nullptr;
  const std::string key = keyFor(invocation, otherBuffers);
  {
    SystemStatCache stats(fs, systemDirsOf(invocation), statLock_, systemStats_);
    std::lock_guard<std::mutex> hold(lock_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->mainFile != mainFile) continue;
      if (it->key == key && it->preamble->CanReuse(invocation, buffer->getMemBufferRef(), bounds, stats)) {
        entries_.splice(entries_.begin(), entries_, it);
        if (use) *use = PreambleUse::Reused;
        return entries_.front().preamble;
      }
      break;
    }
  }
  // Built outside the lock: another document's analysis goes on meanwhile.
  {
    std::lock_guard<std::mutex> hold(statLock_);
    systemStats_.clear();  // what this preamble reads is stat'ed afresh
  }
  IgnoringDiagConsumer quiet;
  llvm::IntrusiveRefCntPtr<DiagnosticsEngine> diagnostics =
      CompilerInstance::createDiagnostics(new DiagnosticOptions, &quiet, /*ShouldOwnClient=*/false);
  CompilerInvocation preambleInvocation(invocation);
  preambleInvocation.getFrontendOpts().SkipFunctionBodies = true;  // asks SkipSystemBodies
  SkipSystemBodies callbacks(cancelled);
  llvm::ErrorOr<PrecompiledPreamble> built =
      PrecompiledPreamble::Build(preambleInvocation, buffer.get(), bounds, *diagnostics, fs,
                                 std::make_shared<PCHContainerOperations>(), /*StoreInMemory=*/false,
                                 /*StoragePath=*/"", callbacks);
  std::lock_guard<std::mutex> hold(lock_);
  if (cancelled && cancelled->load()) return nullptr;
  // Clang writes a preamble with errors too (clangd shows them); the
  // analysis needs one that compiled, and reports the errors itself.
  if (!built || diagnostics->hasErrorOccurred()) {
    return nullptr;
  }
  if (use) *use = PreambleUse::Built;
  auto preamble = std::make_shared<const PrecompiledPreamble>(std::move(*built));
  entries_.remove_if([&](const Entry& e) { return e.mainFile == mainFile; });
  entries_.push_front({mainFile, key, preamble});
  if (entries_.size() > kMaxPreambles) entries_.pop_back();
  return preamble;
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
  std::stable_sort(declarations.begin(), declarations.end(), [&](Decl* a, Decl* b) {
    return sm.isBeforeInTranslationUnit(sm.getFileLoc(a->getLocation()), sm.getFileLoc(b->getLocation()));
  });
  return declarations;
}

}  // namespace fabricize
