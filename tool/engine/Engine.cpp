#include "engine/Engine.h"

#include "engine/MatchRecording.h"
#include "engine/UnitParse.h"

#include "engine/Pch.h"
#include "rule-helpers/Threading.h"
#include "rule-helpers/Vendored.h"

#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Tooling/Transformer/RewriteRule.h"

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

namespace fabricize {

using namespace clang;
using namespace clang::ast_matchers;

namespace {

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

// A match as the callback records it: the RuleMatch the front ends see,
// plus what the engine needs to finish it once every TU has been matched.
struct PendingMatch {
  RuleMatch match;
  std::vector<std::string> editFiles;     // path of each of match.edits
  std::vector<std::string> includeFiles;  // files a rule wants <fabric/fabric.h> in
  threading::MatchNeeds needs;
  bool factOnly = false;  // a Fact for the threading analysis, nothing to show
  bool note = false;      // a Note rule's: for the report only
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
    pending.note = recorded->note;
    pending_.push_back(std::move(pending));
  }

 private:
  bool inProject(const SourceManager& sm, SourceLocation loc) {
    FileID file = sm.getFileID(sm.getExpansionLoc(loc));
    std::string path = pathOf(sm, file);
    return isUnder(path, options_.projectRoot) && !isVendored(path, options_.projectRoot, sm.getBufferData(file));
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
      if (seen.ruleId == finding.ruleId && seen.file == finding.file && seen.line == finding.line &&
          seen.column == finding.column)
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
    std::string firstEdit =
        p.match.edits.empty() ? ""
                              : std::to_string(p.match.edits.front().offset) + ":" + p.match.edits.front().replacement;
    if (seen.insert({p.match.ruleId, p.match.file, p.match.line, p.match.column, firstEdit}).second)
      unique.push_back(std::move(p));
  }
  std::vector<threading::MatchNeeds> needs;
  for (const PendingMatch& p : unique) needs.push_back(p.needs);
  std::vector<threading::Verdict> verdicts = resolveMatches(needs, wholeProgram);
  for (size_t i = 0; i < unique.size(); ++i) {
    PendingMatch& p = unique[i];
    if (p.factOnly) continue;
    if (p.note) {
      if (verdicts[i].applied)
        out.notes.push_back({p.match.ruleId, p.match.file, p.match.line, p.match.column, p.match.explanation});
      continue;
    }
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
        known = known ||
                (f.ruleId == match.ruleId && f.file == match.file && f.line == match.line && f.column == match.column);
      if (!known) out.findings.push_back({match.ruleId, match.file, match.line, match.column, match.explanation});
    }
    if (!match.edits.empty() || match.reportOnly) out.matches.push_back(std::move(match));
  }
}

// One translation unit through the catalogue: its files and findings, and
// its matches, finished once every TU has been matched.
struct SourceResult {
  EngineResult result;
  std::vector<PendingMatch> pending;
  bool definesMain = false;
};
SourceResult runOne(const std::vector<Rule>& catalogue, const tooling::CompilationDatabase& database,
                    const std::string& source, const std::optional<std::string>& pch, const EngineOptions& options);

}  // namespace

EngineResult runRules(const std::vector<Rule>& catalogue, const tooling::CompilationDatabase& database,
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
                    const std::string& source, const std::optional<std::string>& pch, const EngineOptions& options) {
  SourceResult one;
  std::vector<std::unique_ptr<RuleCallback>> callbacks;
  auto beginAttempt = [&](MatchFinder& finder, const UnitFacts& unit) {
    one = SourceResult();
    callbacks.clear();
    for (size_t i = 0; i < catalogue.size(); ++i) {
      callbacks.push_back(std::make_unique<RuleCallback>(catalogue[i], i, options, one.result, one.pending, unit));
      for (const auto& matcher : transformer::detail::buildMatchers(catalogue[i].rule))
        finder.addDynamicMatcher(matcher, callbacks.back().get());
    }
  };
  ParsedUnit parsed = parseAndMatch(database, source, pch, options, beginAttempt);
  if (parsed.cancelled) {
    SourceResult stopped;
    stopped.result.cancelled = true;
    return stopped;
  }
  if (parsed.failed) {
    SourceResult broken;
    broken.result.failedSources.push_back(source);
    broken.result.preamble = parsed.preamble;
    return broken;
  }
  one.result.projectFiles = std::move(parsed.projectFiles);
  one.result.preamble = parsed.preamble;
  one.definesMain = parsed.definesMain;
  return one;
}

}  // namespace

}  // namespace fabricize
