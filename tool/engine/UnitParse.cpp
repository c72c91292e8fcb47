#include "engine/UnitParse.h"

#include "rule-helpers/DataLoops.h"
#include "engine/Pch.h"
#include "engine/Preamble.h"

#include "clang/AST/ASTContext.h"
#include "clang/Basic/Diagnostic.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/FrontendActions.h"
#include "clang/Lex/HeaderSearchOptions.h"
#include "clang/Tooling/Tooling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MD5.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/VirtualFileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <chrono>
#include <mutex>

namespace fabricize {

using namespace clang;
using namespace clang::ast_matchers;

namespace {

std::string realPath(llvm::StringRef path) {
  llvm::SmallString<256> real;
  if (llvm::sys::fs::real_path(path, real)) return path.str();
  return std::string(real);
}

// Swallows diagnostics (of an attempt that will be retried) but still counts
// errors, so the attempt is known to have failed.
// It also notices when the PCH itself was the problem (a header changed
// since it was built), so the PCH is rebuilt rather than skipped forever.
class CountingSilentDiagConsumer : public DiagnosticConsumer {
 public:
  void HandleDiagnostic(DiagnosticsEngine::Level level, const Diagnostic& info) override {
    DiagnosticConsumer::HandleDiagnostic(level, info);
    if (level < DiagnosticsEngine::Error) return;
    llvm::SmallString<256> message;
    info.FormatDiagnostic(message);
    if (llvm::StringRef(message).contains("precompiled header")) {
      stalePch = true;
      return;
    }
    if (info.hasSourceManager() && info.getLocation().isValid() &&
        !info.getSourceManager().isInSystemHeader(info.getSourceManager().getExpansionLoc(info.getLocation())))
      ownError = true;
  }
  bool stalePch = false;
  bool ownError = false;  // an error in the user's files (not LibTorch's, not the PCH's)
};

// Stale PCHs rebuilt in this run, once each even when several workers saw it.
std::mutex rebuildLock;
std::set<std::string> rebuiltPchs;

// Matches only the declarations the source itself parsed (not what came
// from a PCH or a system header): that is what makes a PCH pay off, as
// clangd does with its preamble.
class OwnDeclarationsConsumer : public ASTConsumer {
 public:
  OwnDeclarationsConsumer(MatchFinder& finder, CompilerInstance& ci, const std::atomic<bool>* cancelled,
                          PreambleCache* preambles)
      : finder_(finder), ci_(ci), sm_(ci.getSourceManager()), cancelled_(cancelled), preambles_(preambles) {}
  // No rule looks inside the functions of system headers (LibTorch's
  // thousands of inline bodies): Sema skips them, as clangd does for its
  // preambles. It never skips what the types of the user's code depend on
  // (constexpr functions, deduced return types).
  bool shouldSkipFunctionBody(Decl* d) override {
    return isCancelled() || sm_.isInSystemHeader(sm_.getExpansionLoc(d->getLocation()));
  }
  // False stops the parse: a cancelled analysis ends at the next declaration.
  bool HandleTopLevelDecl(DeclGroupRef group) override {
    for (Decl* d : group) own_.push_back(d);
    return !isCancelled();
  }
  void HandleTranslationUnit(ASTContext& context) override {
    if (isCancelled()) return;
    const SourceManager& sm = context.getSourceManager();
    // The project's headers a preamble held first, as a parse meets them.
    std::vector<Decl*> scope = preambleProjectDeclarations(ci_);
    for (Decl* d : own_)
      if (!sm.isInSystemHeader(sm.getExpansionLoc(d->getLocation()))) scope.push_back(d);
    if (preambles_ && !ci_.getDiagnostics().hasErrorOccurred()) noteDeclarations(scope);
    context.setTraversalScope(scope);
    finder_.matchAST(context);
  }

 private:
  bool isCancelled() const { return cancelled_ && cancelled_->load(std::memory_order_relaxed); }

  // Where the main file's top-level declarations are, for the next edit's
  // declaration preamble (Preamble.h). Those a declaration preamble held
  // are in its copy of the main file.
  void noteDeclarations(const std::vector<Decl*>& scope) {
    if (ci_.getFrontendOpts().Inputs.size() != 1) return;
    std::vector<DeclarationSpan> spans;
    for (Decl* d : scope) {
      // Inside `extern "C" { ... }` is no place to end a preamble.
      if (!d->getLexicalDeclContext()->isTranslationUnit()) continue;
      SourceLocation begin = sm_.getExpansionLoc(d->getBeginLoc());
      SourceLocation last = sm_.getExpansionLoc(d->getEndLoc());
      FileID file = sm_.getFileID(begin);
      if (mainFileOf(sm_, file) != sm_.getMainFileID() || mainFileOf(sm_, sm_.getFileID(last)) != sm_.getMainFileID())
        continue;
      spans.push_back({sm_.getFileOffset(begin), sm_.getFileOffset(last)});
    }
    preambles_->noteDeclarations(ci_.getFrontendOpts().Inputs[0].getFile().str(),
                                 sm_.getBufferData(sm_.getMainFileID()).str(), std::move(spans));
  }

  MatchFinder& finder_;
  CompilerInstance& ci_;
  const SourceManager& sm_;
  const std::atomic<bool>* cancelled_;
  PreambleCache* preambles_;  // set: the parse used a preamble, whose next boundary is noted
  std::vector<Decl*> own_;
};

// Each TU's edits are kept only if the TU compiled: a file that does not
// parse must not be half-migrated.
class RecordingAction : public ASTFrontendAction {
 public:
  // What it finds goes to `parsed`: whether it failed, main, the files read.
  RecordingAction(MatchFinder& finder, ParsedUnit& parsed, const std::string& root, const std::atomic<bool>* cancelled,
                  PreambleCache* preambles, UnitFacts& unit)
      : finder_(finder), parsed_(parsed), root_(root), cancelled_(cancelled), preambles_(preambles), unit_(unit) {}
  bool BeginInvocation(CompilerInstance& ci) override {
    dataloops::forgetTranslationUnit();              // its plans point into the last unit's AST
    ci.getFrontendOpts().SkipFunctionBodies = true;  // asks the consumer, body by body
    unit_.reachesLibTorch = false;
    for (const HeaderSearchOptions::Entry& entry : ci.getHeaderSearchOpts().UserEntries)
      unit_.reachesLibTorch = unit_.reachesLibTorch || llvm::sys::fs::exists(entry.Path + "/torch/torch.h");
    return true;
  }
  std::unique_ptr<ASTConsumer> CreateASTConsumer(CompilerInstance& ci, llvm::StringRef) override {
    return std::make_unique<OwnDeclarationsConsumer>(finder_, ci, cancelled_, preambles_);
  }
  // Called only when the source was actually processed: a PCH or file that
  // cannot be loaded never gets here, and counts as a failure.
  void EndSourceFileAction() override {
    dataloops::forgetTranslationUnit();
    if (!getCompilerInstance().getDiagnostics().hasErrorOccurred()) parsed_.failed = false;
    // A program's main: then every call of the project's functions is in
    // the matched code (Threading.h, wholeProgram).
    if (getCompilerInstance().hasASTContext())
      for (Decl* d : getCompilerInstance().getASTContext().getTraversalScope())
        if (const auto* function = dyn_cast<FunctionDecl>(d); function && function->isMain() && function->hasBody())
          parsed_.definesMain = true;
    // The project's files this TU read: a mirrored output tree needs them.
    const SourceManager& sm = getCompilerInstance().getSourceManager();
    for (auto it = sm.fileinfo_begin(); it != sm.fileinfo_end(); ++it) {
      std::string path = realPathOf(it->first);
      if (isUnder(path, root_)) parsed_.projectFiles.insert(path);
    }
  }

 private:
  MatchFinder& finder_;
  ParsedUnit& parsed_;
  const std::string& root_;
  const std::atomic<bool>* cancelled_;
  PreambleCache* preambles_;
  UnitFacts& unit_;
};

}  // namespace

std::string realPathOf(FileEntryRef entry) {
  llvm::StringRef real = entry.getFileEntry().tryGetRealPathName();
  return real.empty() ? realPath(entry.getName()) : realPath(real);
}

FileID mainFileOf(const SourceManager& sm, FileID file) {
  if (file == sm.getMainFileID() || file.isInvalid()) return file;
  OptionalFileEntryRef entry = sm.getFileEntryRefForID(file);
  OptionalFileEntryRef main = sm.getFileEntryRefForID(sm.getMainFileID());
  return entry && main && &entry->getFileEntry() == &main->getFileEntry() ? sm.getMainFileID() : file;
}

bool isUnder(const std::string& path, const std::string& root) {
  if (root.empty()) return true;
  if (path.size() <= root.size() || path.compare(0, root.size(), root) != 0) return false;
  return path[root.size()] == '/';
}

ParsedUnit parseAndMatch(const tooling::CompilationDatabase& database, const std::string& source,
                         const std::optional<std::string>& cachedPch, const EngineOptions& options,
                         const BeginAttempt& beginAttempt) {
  // With a PCH first; a PCH the compiler rejects (headers changed since)
  // falls back to a plain parse.
  ParsedUnit parsed;
  CountingSilentDiagConsumer quiet;
  std::optional<std::string> pch = cachedPch;
  for (int attempt : {0, 1, 2}) {  // PCH, rebuilt PCH (if it was stale), plain
    bool usePch = attempt < 2;
    if (usePch && !pch) continue;
    if (attempt == 1) {
      if (!quiet.stalePch) continue;
      std::lock_guard<std::mutex> lock(rebuildLock);
      if (rebuiltPchs.insert(*pch).second) {
        llvm::sys::fs::remove(*pch);
        auto commands = database.getCompileCommands(source);
        pch = commands.empty() ? std::nullopt : torchPchFor(source, commands.front(), options.pch);
        if (!pch) continue;
      }
      quiet.stalePch = false;
    }
    parsed = ParsedUnit();
    quiet.ownError = false;
    // Its own working directory: ClangTool changes it to the command's, and
    // the process-wide one is shared by the workers.
    tooling::ClangTool tool(database, {source}, std::make_shared<PCHContainerOperations>(),
                            llvm::vfs::createPhysicalFileSystem());
    for (const auto& [path, text] : options.unsavedFiles) tool.mapVirtualFile(path, text);
    if (!options.resourceDir.empty())
      tool.appendArgumentsAdjuster(tooling::getInsertArgumentAdjuster(("-resource-dir=" + options.resourceDir).c_str(),
                                                                      tooling::ArgumentInsertPosition::BEGIN));
    std::vector<std::string> extra = options.extraArguments;
    // No "N errors generated." from an attempt that will be retried.
    if (usePch) extra.insert(extra.end(), {"-include-pch", *pch, "-fno-caret-diagnostics"});
    if (!extra.empty())
      tool.appendArgumentsAdjuster(tooling::getInsertArgumentAdjuster(extra, tooling::ArgumentInsertPosition::END));
    if (usePch) {
      // A stale PCH is not the user's error: stay quiet and retry plainly.
      tool.setDiagnosticConsumer(&quiet);
      tool.setPrintErrorMessage(false);
    }
    MatchFinder finder;
    UnitFacts unit;
    beginAttempt(finder, unit);
    struct Factory : tooling::FrontendActionFactory {
      MatchFinder& finder;
      ParsedUnit& parsed;
      const std::string& root;
      const std::atomic<bool>* cancelled;
      PreambleCache* preambles = nullptr;  // with the LibTorch PCH only: the preamble is chained on it
      std::string otherBuffers;
      PreambleReport preambleReport;
      UnitFacts& unit;
      Factory(MatchFinder& f, ParsedUnit& p, const std::string& r, const std::atomic<bool>* c, UnitFacts& u)
          : finder(f), parsed(p), root(r), cancelled(c), unit(u) {}
      std::unique_ptr<FrontendAction> create() override {
        return std::make_unique<RecordingAction>(finder, parsed, root, cancelled,
                                                 preambleReport.use == PreambleUse::None ? nullptr : preambles, unit);
      }
      bool runInvocation(std::shared_ptr<CompilerInvocation> invocation, FileManager* files,
                         std::shared_ptr<PCHContainerOperations> pchOperations,
                         DiagnosticConsumer* diagnostics) override {
        std::shared_ptr<const PrecompiledPreamble> preamble;
        if (preambles && invocation->getFrontendOpts().Inputs.size() == 1) {
          // The text as the parse will read it: the editor's, through the overlay.
          llvm::StringRef input = invocation->getFrontendOpts().Inputs[0].getFile();
          if (auto text = files->getVirtualFileSystem().getBufferForFile(input)) {
            auto started = std::chrono::steady_clock::now();
            preamble = preambles->get(*invocation, (*text)->getBuffer(), files->getVirtualFileSystemPtr(), otherBuffers,
                                      cancelled, &preambleReport);
            preambleReport.ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
            if (preamble) {
              auto fs = files->getVirtualFileSystemPtr();
              // The compiler instance owns the main buffer it is given.
              preamble->AddImplicitPreamble(
                  *invocation, fs, llvm::MemoryBuffer::getMemBufferCopy((*text)->getBuffer(), input).release());
            }
          }
        }
        // `preamble` (a temporary file) outlives the parse that reads it.
        return FrontendActionFactory::runInvocation(std::move(invocation), files, std::move(pchOperations),
                                                    diagnostics);
      }
    } factory(finder, parsed, options.projectRoot, options.cancelled, unit);
    if (usePch && options.preambles) {
      factory.preambles = options.preambles;
      for (const auto& [path, text] : options.unsavedFiles)
        if (path != source) {
          llvm::MD5::MD5Result hash = llvm::MD5::hash(llvm::arrayRefFromStringRef(text));
          factory.otherBuffers += path + "=" + hash.digest().str().str() + "\n";
        }
    }
    if (tool.run(&factory) != 0) parsed.failed = true;  // e.g. a compile command that cannot run
    parsed.preamble = factory.preambleReport;
    if (options.cancelled && options.cancelled->load()) {
      parsed.cancelled = true;
      return parsed;
    }
    if (!parsed.failed) break;
    // An editor's text mid-edit: its own errors are its own, and a parse
    // without the PCH (seconds with LibTorch) would only confirm them.
    if (usePch && !options.retryWithoutPch && !quiet.stalePch && quiet.ownError) break;
    if (usePch && options.pch.verbose)
      llvm::errs() << "fabricize: " << source << ": the PCH " << *pch << " was not accepted"
                   << (quiet.stalePch ? " (stale)" : "") << "; trying again\n";
  }
  return parsed;
}

}  // namespace fabricize
