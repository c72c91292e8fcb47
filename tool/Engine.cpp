#include "Engine.h"

#include "MatchRecording.h"

#include "Pch.h"
#include "Preamble.h"
#include "Edits.h"
#include "Matchers.h"
#include "Threading.h"
#include "Vendored.h"

#include "clang/AST/ASTContext.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/FrontendActions.h"
#include "clang/Lex/HeaderSearchOptions.h"
#include "clang/Tooling/Tooling.h"
#include "clang/Tooling/Transformer/RewriteRule.h"
#include "clang/Basic/Diagnostic.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MD5.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/VirtualFileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <map>
#include <chrono>
#include <tuple>
#include <mutex>
#include <thread>

namespace fabricize {

using namespace clang;
using namespace clang::ast_matchers;

namespace {

std::string realPath(llvm::StringRef path) {
  llvm::SmallString<256> real;
  if (llvm::sys::fs::real_path(path, real)) return path.str();
  return std::string(real);
}

// A file's real path as its translation unit resolved it: names relative to
// the compile command's directory resolve there, not in this process's
// working directory (each worker's file system has its own).
std::string realPathOf(FileEntryRef entry) {
  llvm::StringRef real = entry.getFileEntry().tryGetRealPathName();
  return real.empty() ? realPath(entry.getName()) : realPath(real);
}

// The main file for a declaration preamble's copy of it (the declarations
// above the edited one were parsed there; Preamble.h), else `file`: edits
// and findings there are the main file's, at the same offsets.
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

// Whether a file is third-party code the project carries (Vendored.h),
// asked once per file.
bool isVendored(const std::string& path, const std::string& root, llvm::StringRef text) {
  static std::mutex mutex;
  static std::map<std::string, bool> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto [entry, inserted] = known.try_emplace(path, false);
  if (inserted) entry->second = isVendoredFile(path, root, text);
  return entry->second;
}

// What the engine knows of the translation unit being matched.
struct UnitFacts {
  // Its compile command reaches LibTorch's headers (its target links
  // LibTorch, and so the runtime once migrated): an edit that brings the
  // runtime into code no training code holds (a logger class's file) can go
  // there; in a tool of the project that has no LibTorch it could not build.
  bool reachesLibTorch = true;
};

// A match as the callback records it: the RuleMatch the front ends see,
// plus what the engine needs to finish it once every TU has been matched.
struct PendingMatch {
  RuleMatch match;
  std::vector<std::string> editFiles;     // path of each of match.edits
  std::vector<std::string> includeFiles;  // files a rule wants <fabric/fabric.h> in
  threading::MatchNeeds needs;
  bool factOnly = false;  // a Fact for the threading analysis, nothing to show
};

// One callback per rule: records each match (MatchRecording.h) with the
// paths of its files.
class RuleCallback : public MatchFinder::MatchCallback {
 public:
  RuleCallback(const Rule& rule, size_t index, const EngineOptions& options, EngineResult& out,
               std::vector<PendingMatch>& pending, const UnitFacts& unit)
      : rule_(rule), index_(index), options_(options), out_(out), pending_(pending), unit_(unit) {}

  // The rule's id, where MatchFinder's profiling names a callback.
  llvm::StringRef getID() const override { return rule_.id; }

  void run(const MatchFinder::MatchResult& result) override {
    const SourceManager& sm = *result.SourceManager;
    RecordingScope scope;
    scope.editable = [this](const SourceManager& sm, SourceLocation loc) { return inProject(sm, loc); };
    scope.reachesLibTorch = unit_.reachesLibTorch;
    scope.editsNeedFabric = options_.editsNeedFabric;
    std::optional<RecordedMatch> recorded = recordMatch(rule_, index_, result, scope);
    if (!recorded) return;
    if (recorded->skipped) {
      addFinding(sm, recorded->where, recorded->explanation);
      return;
    }
    PendingMatch pending;
    RuleMatch& match = pending.match;
    match.ruleId = rule_.id;
    match.file = pathOf(sm, sm.getFileID(recorded->where));
    match.line = sm.getExpansionLineNumber(recorded->where);
    match.column = sm.getExpansionColumnNumber(recorded->where);
    match.explanation = std::move(recorded->explanation);
    match.reportOnly = recorded->reportOnly;
    for (RecordedMatch::Edit& edit : recorded->edits) {
      FileID file = mainFileOf(sm, edit.file);
      pending.editFiles.push_back(fileResult(sm, file));
      match.edits.push_back(std::move(edit.text));
    }
    for (FileID file : recorded->includeFiles) pending.includeFiles.push_back(fileResult(sm, mainFileOf(sm, file)));
    pending.needs = std::move(recorded->needs);
    pending.factOnly = recorded->factOnly;
    pending_.push_back(std::move(pending));
  }

 private:
  bool inProject(const SourceManager& sm, SourceLocation loc) {
    FileID file = sm.getFileID(sm.getExpansionLoc(loc));
    std::string path = pathOf(sm, file);
    return isUnder(path, options_.projectRoot) &&
           !isVendored(path, options_.projectRoot, sm.getBufferData(file));
  }
  std::string pathOf(const SourceManager& sm, FileID file) {
    auto entry = sm.getFileEntryRefForID(file);
    return entry ? realPathOf(*entry) : std::string();
  }
  // The path of `file`, whose text is kept as parsed.
  std::string fileResult(const SourceManager& sm, FileID file) {
    std::string path = pathOf(sm, file);
    auto [it, inserted] = out_.files.try_emplace(path);
    if (inserted) it->second.original = sm.getBufferData(file).str();
    return path;
  }
  void addFinding(const SourceManager& sm, SourceLocation loc, std::string message) {
    loc = sm.getExpansionLoc(loc);
    Finding finding{rule_.id, pathOf(sm, sm.getFileID(loc)), sm.getExpansionLineNumber(loc),
                    sm.getExpansionColumnNumber(loc), std::move(message)};
    for (const Finding& seen : out_.findings)  // headers are seen once per TU
      if (seen.ruleId == finding.ruleId && seen.file == finding.file &&
          seen.line == finding.line && seen.column == finding.column)
        return;
    out_.findings.push_back(std::move(finding));
  }

  const Rule& rule_;
  size_t index_;
  const EngineOptions& options_;
  EngineResult& out_;
  std::vector<PendingMatch>& pending_;
  const UnitFacts& unit_;
};

// Once every TU is matched: which functions get the Fabric (Threading.h),
// then the matches whose edits can be applied go to the files, and those
// that cannot become findings.
void finishMatches(std::vector<PendingMatch> pending, EngineResult& out, bool wholeProgram) {
  // A header's matches are seen once per TU that includes it: once each.
  std::vector<PendingMatch> unique;
  std::set<std::tuple<std::string, std::string, unsigned, unsigned, std::string>> seen;
  for (PendingMatch& p : pending) {
    std::string firstEdit = p.match.edits.empty() ? "" : std::to_string(p.match.edits.front().offset) + ":" +
                                                             p.match.edits.front().replacement;
    if (seen.insert({p.match.ruleId, p.match.file, p.match.line, p.match.column, firstEdit}).second)
      unique.push_back(std::move(p));
  }
  std::vector<threading::MatchNeeds> needs;
  for (const PendingMatch& p : unique) needs.push_back(p.needs);
  std::vector<threading::Verdict> verdicts = resolveMatches(needs, wholeProgram);
  for (size_t i = 0; i < unique.size(); ++i) {
    PendingMatch& p = unique[i];
    if (p.factOnly) continue;
    RuleMatch& match = p.match;
    if (!verdicts[i].applied) {
      if (!verdicts[i].report) continue;
      match.edits.clear();
      match.reportOnly = true;
      match.notMigrated = true;
      match.explanation = threading::notMigratedMessage(match.explanation, verdicts[i]);
      out.findings.push_back(
          {match.ruleId, match.file, match.line, match.column, match.explanation, !verdicts[i].neverRuns});
      out.matches.push_back(std::move(match));
      continue;
    }
    for (size_t e = 0; e < match.edits.size(); ++e) out.files[p.editFiles[e]].edits.push_back(match.edits[e]);
    for (const std::string& file : p.includeFiles) out.files[file].wantsInclude = true;
    if (match.reportOnly) {
      bool known = false;
      for (const Finding& f : out.findings)
        known = known || (f.ruleId == match.ruleId && f.file == match.file && f.line == match.line &&
                          f.column == match.column);
      if (!known) out.findings.push_back({match.ruleId, match.file, match.line, match.column, match.explanation});
    }
    if (!match.edits.empty() || match.reportOnly) out.matches.push_back(std::move(match));
  }
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
  RecordingAction(MatchFinder& finder, bool& failed, const std::string& root, std::set<std::string>& read,
                  bool& definesMain, const std::atomic<bool>* cancelled, PreambleCache* preambles, UnitFacts& unit)
      : finder_(finder), failed_(failed), root_(root), read_(read), definesMain_(definesMain),
        cancelled_(cancelled), preambles_(preambles), unit_(unit) {}
  bool BeginInvocation(CompilerInstance& ci) override {
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
    if (!getCompilerInstance().getDiagnostics().hasErrorOccurred()) failed_ = false;
    // A program's main: then every call of the project's functions is in
    // the matched code (Threading.h, wholeProgram).
    if (getCompilerInstance().hasASTContext())
      for (Decl* d : getCompilerInstance().getASTContext().getTraversalScope())
        if (const auto* function = dyn_cast<FunctionDecl>(d); function && function->isMain() && function->hasBody())
          definesMain_ = true;
    // The project's files this TU read: a mirrored output tree needs them.
    const SourceManager& sm = getCompilerInstance().getSourceManager();
    for (auto it = sm.fileinfo_begin(); it != sm.fileinfo_end(); ++it) {
      std::string path = realPathOf(it->first);
      if (isUnder(path, root_)) read_.insert(path);
    }
  }

 private:
  MatchFinder& finder_;
  bool& failed_;
  const std::string& root_;
  std::set<std::string>& read_;
  bool& definesMain_;
  const std::atomic<bool>* cancelled_;
  PreambleCache* preambles_;
  UnitFacts& unit_;
};

// One translation unit through the catalogue: its files and findings, and
// its matches, finished once every TU has been matched.
struct SourceResult {
  EngineResult result;
  std::vector<PendingMatch> pending;
  bool definesMain = false;
};
SourceResult runOne(const std::vector<Rule>& catalogue, const tooling::CompilationDatabase& database,
                    const std::string& source, const std::optional<std::string>& pch,
                    const EngineOptions& options);

}  // namespace

EngineResult runRules(const std::vector<Rule>& catalogue,
                      const tooling::CompilationDatabase& database,
                      const std::vector<std::string>& sources, const EngineOptions& options) {
  // PCHs first, one source at a time: two workers must not build the same one.
  std::vector<std::optional<std::string>> pchs;
  for (const std::string& source : sources) {
    auto commands = database.getCompileCommands(source);
    pchs.push_back(commands.empty() ? std::nullopt : torchPchFor(source, commands.front(), options.pch));
  }
  std::vector<SourceResult> perSource(sources.size());
  std::atomic<size_t> next{0}, started{0};
  std::mutex progressLock;
  auto work = [&]() {
    for (size_t i = next++; i < sources.size(); i = next++) {
      if (options.cancelled && options.cancelled->load()) {
        perSource[i].result.cancelled = true;
        continue;
      }
      if (options.progress) {
        std::lock_guard<std::mutex> lock(progressLock);
        options.progress(++started, sources.size(), sources[i]);
      }
      perSource[i] = runOne(catalogue, database, sources[i], pchs[i], options);
    }
  };
  unsigned workers = std::max(1u, std::min<unsigned>(options.jobs, static_cast<unsigned>(sources.size())));
  std::vector<std::thread> threads;
  for (unsigned w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();

  // Merged in source order, so the result does not depend on -j.
  EngineResult total;
  std::vector<PendingMatch> pending;
  bool wholeProgram = false;
  for (const SourceResult& one : perSource)
    if (one.result.cancelled) {
      total.cancelled = true;
      return total;
    }
  for (size_t i = 0; i < sources.size(); ++i) {
    wholeProgram = wholeProgram || perSource[i].definesMain;
    EngineResult& one = perSource[i].result;
    if (one.preamble.use != PreambleUse::None) total.preamble = one.preamble;
    total.failedSources.insert(total.failedSources.end(), one.failedSources.begin(), one.failedSources.end());
    if (!one.failedSources.empty()) continue;
    total.projectFiles.insert(one.projectFiles.begin(), one.projectFiles.end());
    for (auto& [path, result] : one.files) total.files.try_emplace(path, std::move(result));
    for (auto& p : perSource[i].pending) pending.push_back(std::move(p));
    for (auto& f : one.findings) {
      bool seen = false;
      for (const Finding& g : total.findings)
        seen = seen || (g.ruleId == f.ruleId && g.file == f.file && g.line == f.line && g.column == f.column);
      if (!seen) total.findings.push_back(std::move(f));
    }
  }
  finishMatches(std::move(pending), total, wholeProgram);
  return total;
}

namespace {

SourceResult runOne(const std::vector<Rule>& catalogue, const tooling::CompilationDatabase& database,
                    const std::string& source, const std::optional<std::string>& cachedPch,
                    const EngineOptions& options) {
    EngineResult perSource;
    std::vector<PendingMatch> pending;
    bool definesMain = false;
    // With a PCH first; a PCH the compiler rejects (headers changed since)
    // falls back to a plain parse.
    bool failed = true;
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
      perSource = EngineResult();
      quiet.ownError = false;
      pending.clear();
      definesMain = false;
      failed = true;  // until the action reports a clean parse
      // Its own working directory: ClangTool changes it to the command's, and
      // the process-wide one is shared by the workers.
      tooling::ClangTool tool(database, {source}, std::make_shared<PCHContainerOperations>(),
                              llvm::vfs::createPhysicalFileSystem());
      for (const auto& [path, text] : options.unsavedFiles) tool.mapVirtualFile(path, text);
      if (!options.resourceDir.empty())
        tool.appendArgumentsAdjuster(tooling::getInsertArgumentAdjuster(
            ("-resource-dir=" + options.resourceDir).c_str(), tooling::ArgumentInsertPosition::BEGIN));
      std::vector<std::string> extra = options.extraArguments;
      // No "N errors generated." from an attempt that will be retried.
      if (usePch) extra.insert(extra.end(), {"-include-pch", *pch, "-fno-caret-diagnostics"});
      if (!extra.empty())
        tool.appendArgumentsAdjuster(
            tooling::getInsertArgumentAdjuster(extra, tooling::ArgumentInsertPosition::END));
      if (usePch) {
        // A stale PCH is not the user's error: stay quiet and retry plainly.
        tool.setDiagnosticConsumer(&quiet);
        tool.setPrintErrorMessage(false);
      }
      std::vector<std::unique_ptr<RuleCallback>> callbacks;
      MatchFinder finder;
      UnitFacts unit;
      for (size_t i = 0; i < catalogue.size(); ++i) {
        callbacks.push_back(std::make_unique<RuleCallback>(catalogue[i], i, options, perSource, pending, unit));
        for (const auto& matcher : transformer::detail::buildMatchers(catalogue[i].rule))
          finder.addDynamicMatcher(matcher, callbacks.back().get());
      }
      struct Factory : tooling::FrontendActionFactory {
        MatchFinder& finder;
        bool& failed;
        const std::string& root;
        std::set<std::string>& read;
        bool& definesMain;
        const std::atomic<bool>* cancelled;
        PreambleCache* preambles = nullptr;  // with the LibTorch PCH only: the preamble is chained on it
        std::string otherBuffers;
        PreambleReport preambleReport;
        UnitFacts& unit;
        Factory(MatchFinder& f, bool& x, const std::string& r, std::set<std::string>& files, bool& main,
                const std::atomic<bool>* c, UnitFacts& u)
            : finder(f), failed(x), root(r), read(files), definesMain(main), cancelled(c), unit(u) {}
        std::unique_ptr<FrontendAction> create() override {
          return std::make_unique<RecordingAction>(finder, failed, root, read, definesMain, cancelled,
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
              preamble = preambles->get(*invocation, (*text)->getBuffer(), files->getVirtualFileSystemPtr(),
                                        otherBuffers, cancelled, &preambleReport);
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
      } factory(finder, failed, options.projectRoot, perSource.projectFiles, definesMain, options.cancelled, unit);
      if (usePch && options.preambles) {
        factory.preambles = options.preambles;
        for (const auto& [path, text] : options.unsavedFiles)
          if (path != source) {
            llvm::MD5::MD5Result hash = llvm::MD5::hash(llvm::arrayRefFromStringRef(text));
            factory.otherBuffers += path + "=" + hash.digest().str().str() + "\n";
          }
      }
      if (tool.run(&factory) != 0) failed = true;  // e.g. a compile command that cannot run
      perSource.preamble = factory.preambleReport;
      if (options.cancelled && options.cancelled->load()) {
        SourceResult stopped;
        stopped.result.cancelled = true;
        return stopped;
      }
      if (!failed) break;
      // An editor's text mid-edit: its own errors are its own, and a parse
      // without the PCH (seconds with LibTorch) would only confirm them.
      if (usePch && !options.retryWithoutPch && !quiet.stalePch && quiet.ownError) break;
      if (usePch && options.pch.verbose)
        llvm::errs() << "fabricize: " << source << ": the PCH " << *pch << " was not accepted"
                     << (quiet.stalePch ? " (stale)" : "") << "; trying again\n";
    }
    if (failed) {
      SourceResult broken;
      broken.result.failedSources.push_back(source);
      broken.result.preamble = perSource.preamble;
      return broken;
    }
    return {std::move(perSource), std::move(pending), definesMain};
}

}  // namespace

}  // namespace fabricize
