#include "CatalogueCheck.h"

#include "rule-helpers/DataLoops.h"
#include "services/FabricInclude.h"
#include "FixItPieces.h"
#include "engine/MatchRecording.h"
#include "inputs/Project.h"
#include "rule-helpers/Threading.h"

#include "clang-tidy/ClangTidyDiagnosticConsumer.h"

#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Tooling/Transformer/RewriteRule.h"
#include "llvm/Support/Regex.h"

#include <cctype>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>

namespace fabricize::tidy {

using namespace clang;
using namespace clang::ast_matchers;

static_assert(sizeof(size_t) >= 8, "edit keys pack a rule index and a serial number into size_t");

namespace {

// TextEdit::ruleIndex orders insertions at one offset by catalogue position
// (then, within a rule, by match order: mergeEdits sorts stably). Here it
// also carries which match the edit came from: rule index in the high 32
// bits, a per-TU serial number (from 1) in the low 32.
constexpr size_t kSerialBits = 32;
constexpr size_t kSerialMask = (size_t(1) << kSerialBits) - 1;
// The Fabric include renderFixed() adds keeps TextEdit's default rule index
// 0, which no match's key has (serial numbers start at 1).
constexpr size_t kIncludeKey = 0;

size_t serialOf(size_t key) { return key & kSerialMask; }

}  // namespace

// One match of one check, kept until every check has seen the whole TU.
// (Edits keyed in TextEdit::ruleIndex; `includeFiles` go to the Session.)
struct Recorded : RecordedMatch {
  bool hidden = false;  // a fact for the threading analysis, or an edit it dropped
};

// The matches of all fabric checks in one translation unit, and the fix-its
// each one carries once their edits are merged as `fabricize` merges them.
class Session {
 public:
  // Checks are created per translation unit; those of one run of clang-tidy
  // share its ClangTidyContext, and so one Session.
  static std::shared_ptr<Session> of(clang::tidy::ClangTidyContext* context) {
    static std::mutex mutex;
    static std::map<clang::tidy::ClangTidyContext*, std::weak_ptr<Session>> sessions;
    std::lock_guard<std::mutex> lock(mutex);
    for (auto it = sessions.begin(); it != sessions.end();)
      it = it->second.expired() ? sessions.erase(it) : std::next(it);
    std::shared_ptr<Session> session = sessions[context].lock();
    if (!session) {
      session = std::make_shared<Session>();
      session->context_ = context;
      sessions[context] = session;
    }
    return session;
  }

  void startTranslationUnit() {
    definesMain_ = false;
    records_.clear();
    includeRequests_.clear();
    owner_.clear();
    fixes_.clear();
    notes_.clear();
    sm_ = nullptr;
    serial_ = 0;
    merged_ = false;
  }

  size_t nextKey(size_t ruleIndex) { return (ruleIndex << kSerialBits) | ++serial_; }

  // Registers fabric-thread-fabric's matchers once per MatchFinder, for the
  // threading analysis only.
  void collectFacts(MatchFinder* finder, const FabricOptions& options);
  // fabric-thread-fabric runs: functions that need the Fabric get it passed
  // in. Without it, no fix may use a Fabric its function does not have.
  void enableThreading() { threadingEnabled_ = true; }
  void sawMain() { definesMain_ = true; }

  size_t add(const SourceManager& sm, Recorded record) {
    sm_ = &sm;
    for (const auto& [file, edit] : record.edits) owner_[serialOf(edit.ruleIndex)] = records_.size();
    records_.push_back(std::move(record));
    return records_.size() - 1;
  }
  // `record` is npos when the match that asked for the include reported nothing.
  void requestInclude(const SourceManager& sm, FileID file, size_t record) {
    sm_ = &sm;
    includeRequests_.push_back({file, record});
  }

  const Recorded& record(size_t index) {
    if (!merged_) merge();
    return records_[index];
  }

  const std::vector<FixItHint>& fixesOf(size_t index) {
    if (!merged_) merge();
    return fixes_[index];
  }
  // Where this match's insertion travels with another match's fix-it.
  const std::vector<std::pair<SourceLocation, std::string>>& notesOf(size_t index) {
    if (!merged_) merge();
    return notes_[index];
  }

 private:
  // Whether clang-tidy writes the fix-its it is given for `file`: the main
  // file, and headers its header filter selects.
  bool fixesApplyTo(FileID file) const {
    if (file == sm_->getMainFileID()) return true;
    const clang::tidy::ClangTidyOptions& options = context_->getOptions();
    if (sm_->isInSystemHeader(sm_->getLocForStartOfFile(file)) && !options.SystemHeaders.value_or(false)) return false;
    auto entry = sm_->getFileEntryRefForID(file);
    if (!entry) return false;
    llvm::StringRef name = entry->getName();
    if (!options.HeaderFilterRegex || !llvm::Regex(*options.HeaderFilterRegex).match(name)) return false;
    return !options.ExcludeHeaderFilterRegex || options.ExcludeHeaderFilterRegex->empty() ||
           !llvm::Regex(*options.ExcludeHeaderFilterRegex).match(name);
  }

  // The files each file of the TU includes that are not system headers:
  // what `fabricize` counts as the project's headers.
  std::map<FileID, std::vector<FileID>> userIncludes() const {
    std::map<FileID, std::vector<FileID>> includes;
    for (unsigned i = 1; i < sm_->local_sloc_entry_size(); ++i) {
      const SrcMgr::SLocEntry& entry = sm_->getLocalSLocEntry(i);
      if (!entry.isFile() || entry.getFile().getFileCharacteristic() != SrcMgr::C_User) continue;
      SourceLocation includedAt = entry.getFile().getIncludeLoc();
      if (includedAt.isInvalid()) continue;
      FileID file = sm_->getFileID(SourceLocation::getFromRawEncoding(entry.getOffset()));
      includes[sm_->getFileID(sm_->getExpansionLoc(includedAt))].push_back(file);
    }
    return includes;
  }

  // The absolute path of `file`; empty when it has none.
  std::string pathOf(FileID file) const {
    auto entry = sm_->getFileEntryRefForID(file);
    return entry ? absolutePath(entry->getName().str()) : std::string();
  }

  // The files with fix-its clang-tidy writes, rendered as `fabricize` renders
  // them (tool/services/FabricInclude.cpp): the include goes where no project header
  // (here: a non-system header, as the preprocessor saw it) brings it.
  void renderFiles() {
    std::map<std::string, FileID> idOf;
    std::map<std::string, FileResult> files;
    for (const auto& [file, edits] : perFile_) {
      if (!fixesApplyTo(file)) continue;
      const std::string path = pathOf(file);
      bool invalid = false;
      llvm::StringRef text = sm_->getBufferData(file, &invalid);
      if (path.empty() || invalid) continue;
      FileResult& result = files[path];
      result.original = text.str();
      result.edits = edits;
      for (const auto& request : includeRequests_)
        result.wantsInclude =
            result.wantsInclude ||
            (request.first == file &&
             (request.second == npos || (!records_[request.second].hidden && !records_[request.second].edits.empty())));
      idOf[path] = file;
    }
    std::map<std::string, std::vector<std::string>> headersOf;
    std::map<std::string, std::string> texts;  // the headers as this TU read them
    for (const auto& [file, headers] : userIncludes()) {
      std::vector<std::string>& paths = headersOf[pathOf(file)];
      for (FileID header : headers) {
        const std::string path = pathOf(header);
        bool invalid = false;
        llvm::StringRef text = sm_->getBufferData(header, &invalid);
        if (path.empty() || invalid) continue;
        paths.push_back(path);
        texts.emplace(path, text.str());
      }
    }
    auto includesOf = [&](const std::string& path, const std::string&) {
      auto found = headersOf.find(path);
      return found != headersOf.end() ? found->second : std::vector<std::string>{};
    };
    for (auto& [path, rendered] : renderMigration(files, "/", texts, includesOf))
      rendered_[idOf.at(path)] = {files.at(path).original, std::move(rendered.merged.edits)};
  }

  // The edits of all matches, merged per file the way `fabricize --stdout`
  // merges them, keeping track of which match each surviving edit came from.
  // Which functions of this TU get the Fabric, as `fabricize` decides it
  // over a whole project (Threading.h): matches that cannot be applied lose
  // their fix-its, and are reported when a person must know.
  void resolveThreading() {
    std::vector<threading::MatchNeeds> needs;
    for (const Recorded& record : records_) needs.push_back(record.needs);
    // One TU: the whole program when it holds main (Threading.h).
    std::vector<threading::Verdict> verdicts = resolveMatches(needs, definesMain_, threadingEnabled_);
    for (size_t i = 0; i < records_.size(); ++i) {
      Recorded& record = records_[i];
      if (verdicts[i].applied) continue;
      record.edits.clear();
      if (!verdicts[i].report) {
        record.hidden = true;
        continue;
      }
      record.explanation = threading::notMigratedMessage(record.explanation, verdicts[i]);
    }
  }

  void merge() {
    merged_ = true;
    resolveThreading();
    fixes_.assign(records_.size(), {});
    notes_.assign(records_.size(), {});
    if (!sm_) return;
    perFile_.clear();
    rendered_.clear();
    for (const Recorded& record : records_)
      for (const auto& [file, edit] : record.edits) perFile_[file].push_back(edit);
    std::map<FileID, size_t> includeOwner;
    for (const auto& [file, record] : includeRequests_) {
      if (record != npos && (records_[record].hidden || records_[record].edits.empty())) continue;
      perFile_[file];  // an include alone is a change too
      if (record != npos && !includeOwner.count(file)) includeOwner[file] = record;
    }
    renderFiles();
    for (auto& [file, render] : rendered_) {
      const std::string& original = render.first;
      MergedEdits merged;
      merged.edits = std::move(render.second);
      // The include goes with the match that asked for it, else with the
      // file's first edited match.
      size_t fallback = npos;
      for (const TextEdit& edit : merged.edits)
        if (edit.ruleIndex != kIncludeKey) {
          fallback = owner_[serialOf(edit.ruleIndex)];
          break;
        }
      // (`path`, not the structured binding `file`: capturing one is C++20.)
      const FileID path = file;
      auto ownerOf = [&](const TextEdit& edit) -> size_t {
        if (edit.ruleIndex != kIncludeKey) return owner_[serialOf(edit.ruleIndex)];
        auto it = includeOwner.find(path);
        return it != includeOwner.end() ? it->second : fallback;
      };
      std::vector<FixItPiece> pieces = fixItPieces(original, merged.edits, ownerOf);
      for (const FixItPiece& piece : pieces) {
        SourceLocation begin = sm_->getComposedLoc(file, piece.offset);
        for (size_t other : piece.absorbed)
          notes_[other].push_back(
              {begin, "this insertion is part of the fix-it of [" + records_[piece.owner].ruleId + "] here"});
        fixes_[piece.owner].push_back(
            piece.length == 0
                ? FixItHint::CreateInsertion(begin, piece.text)
                : FixItHint::CreateReplacement(
                      CharSourceRange::getCharRange(begin, begin.getLocWithOffset(piece.length)), piece.text));
      }
    }
  }

  static constexpr size_t npos = static_cast<size_t>(-1);
  std::set<MatchFinder*> collectedBy_;
  std::vector<std::unique_ptr<MatchFinder::MatchCallback>> collectors_;
  bool threadingEnabled_ = false;
  bool definesMain_ = false;
  std::vector<Recorded> records_;
  std::map<size_t, size_t> owner_;  // serial -> record
  std::vector<std::pair<FileID, size_t>> includeRequests_;
  std::map<FileID, std::vector<TextEdit>> perFile_;
  std::map<FileID, std::pair<std::string, std::vector<TextEdit>>> rendered_;  // original, applied edits
  clang::tidy::ClangTidyContext* context_ = nullptr;
  std::vector<std::vector<FixItHint>> fixes_;
  std::vector<std::vector<std::pair<SourceLocation, std::string>>> notes_;
  const SourceManager* sm_ = nullptr;
  size_t serial_ = 0;
  bool merged_ = false;

 public:
  static constexpr size_t noRecord = npos;
};

CatalogueCheck::CatalogueCheck(llvm::StringRef name, clang::tidy::ClangTidyContext* context)
    : ClangTidyCheck(name, context), session_(Session::of(context)) {
  if (name == kThreadingRuleId) session_->enableThreading();
  const FabricOptions defaults;
  options_.accelerator = Options.getLocalOrGlobal("Accelerator", defaults.accelerator).str();
  options_.devices = Options.getLocalOrGlobal("Devices", defaults.devices).str();
  options_.strategy = Options.getLocalOrGlobal("Strategy", defaults.strategy).str();
  options_.precision = Options.getLocalOrGlobal("Precision", defaults.precision).str();
  options_.num_nodes = Options.getLocalOrGlobal("NumNodes", defaults.num_nodes).str();
  bool valid = true;
  const std::pair<const char*, const std::string*> values[] = {{"Accelerator", &options_.accelerator},
                                                               {"Devices", &options_.devices},
                                                               {"Strategy", &options_.strategy},
                                                               {"Precision", &options_.precision}};
  for (const auto& [option, value] : values)
    if (!isPlainOptionValue(*value)) {
      configurationDiag(
          "invalid value '%0' for option '%1.%2': use letters, digits, '-', '_', ',' "
          "or '.'; check '%1' is disabled",
          DiagnosticIDs::Error)
          << *value << name << option;
      valid = false;
    }
  if (!options_.num_nodes.empty() && options_.num_nodes.find_first_not_of("0123456789") != std::string::npos) {
    configurationDiag(
        "invalid value '%0' for option '%1.NumNodes': a positive integer, or empty; "
        "check '%1' is disabled",
        DiagnosticIDs::Error)
        << options_.num_nodes << name;
    valid = false;
  }
  if (!valid) return;
  // A name the runtime would refuse when the program runs, refused now in
  // its words (the valid names, the nearest one).
  if (std::optional<FabricOptionProblem> problem = checkFabricOptions(options_)) {
    const std::map<std::string, std::pair<const char*, const std::string*>> optionOf = {
        {"accelerator", {"Accelerator", &options_.accelerator}},
        {"devices", {"Devices", &options_.devices}},
        {"strategy", {"Strategy", &options_.strategy}},
        {"precision", {"Precision", &options_.precision}},
        {"num_nodes", {"NumNodes", &options_.num_nodes}}};
    const auto& [option, value] = optionOf.at(problem->field);
    configurationDiag("invalid value '%0' for option '%1.%2': %3; check '%1' is disabled", DiagnosticIDs::Error)
        << *value << name << option << problem->message;
    return;
  }
  std::vector<Rule> catalogue = buildCatalogue(options_);
  for (size_t i = 0; i < catalogue.size(); ++i)
    if (catalogue[i].id == name) {
      rule_ = std::move(catalogue[i]);
      ruleIndex_ = i;
    }
  if (!rule_) configurationDiag("no rule '%0' in the fabricize catalogue", DiagnosticIDs::Error) << name;
}

CatalogueCheck::~CatalogueCheck() = default;

void CatalogueCheck::storeOptions(clang::tidy::ClangTidyOptions::OptionMap& options) {
  Options.store(options, "Accelerator", options_.accelerator);
  Options.store(options, "Devices", options_.devices);
  Options.store(options, "Strategy", options_.strategy);
  Options.store(options, "Precision", options_.precision);
  Options.store(options, "NumNodes", options_.num_nodes);
}

void CatalogueCheck::registerMatchers(MatchFinder* finder) {
  if (!rule_) return;
  for (const auto& matcher : transformer::detail::buildMatchers(rule_->rule)) finder->addDynamicMatcher(matcher, this);
  session_->collectFacts(finder, options_);
}

void CatalogueCheck::onStartOfTranslationUnit() {
  dataloops::forgetTranslationUnit();  // its plans point into the last unit's AST
  session_->startTranslationUnit();
  recorded_.clear();
}

// A match recorded as the engine records it (tool/engine/MatchRecording.cpp), its
// edits keyed by which match they came from. A match of the fact collector
// (`factsOnly`) feeds the threading analysis and is never shown.
size_t recordMatch(const Rule& rule, size_t ruleIndex, Session& session, const MatchFinder::MatchResult& result,
                   bool factsOnly) {
  RecordingScope scope;
  scope.factsOnly = factsOnly;
  scope.editKey = [&] { return session.nextKey(ruleIndex); };
  std::optional<RecordedMatch> recorded = fabricize::recordMatch(rule, ruleIndex, result, scope);
  if (!recorded) return Session::noRecord;
  std::vector<FileID> includes = std::move(recorded->includeFiles);
  Recorded record;
  static_cast<RecordedMatch&>(record) = std::move(*recorded);
  record.hidden = record.factOnly || record.note;
  size_t index = session.add(*result.SourceManager, std::move(record));
  for (FileID file : includes) session.requestInclude(*result.SourceManager, file, index);
  return index;
}

// Feeds the threading analysis with fabric-thread-fabric's facts (which
// functions can take the Fabric, who calls them) whichever checks run.
class FactCollector : public MatchFinder::MatchCallback {
 public:
  FactCollector(Rule rule, size_t index, Session& session) : rule_(std::move(rule)), index_(index), session_(session) {}
  void run(const MatchFinder::MatchResult& result) override {
    recordMatch(rule_, index_, session_, result, /*factsOnly=*/true);
  }

 private:
  Rule rule_;
  size_t index_;
  Session& session_;
};

// Notes that the TU defines main: then it is a whole program.
class MainCollector : public MatchFinder::MatchCallback {
 public:
  explicit MainCollector(Session& session) : session_(session) {}
  void run(const MatchFinder::MatchResult&) override { session_.sawMain(); }

 private:
  Session& session_;
};

void Session::collectFacts(MatchFinder* finder, const FabricOptions& options) {
  if (!collectedBy_.insert(finder).second) return;
  collectors_.push_back(std::make_unique<MainCollector>(*this));
  finder->addMatcher(functionDecl(isMain(), isDefinition()), collectors_.back().get());
  std::vector<Rule> catalogue = buildCatalogue(options);
  for (size_t i = 0; i < catalogue.size(); ++i)
    if (catalogue[i].id == kThreadingRuleId) {
      collectors_.push_back(std::make_unique<FactCollector>(catalogue[i], i, *this));
      for (const auto& matcher : transformer::detail::buildMatchers(catalogue[i].rule))
        finder->addDynamicMatcher(matcher, collectors_.back().get());
    }
}

void CatalogueCheck::check(const MatchFinder::MatchResult& result) {
  size_t index = recordMatch(*rule_, ruleIndex_, *session_, result, /*factsOnly=*/false);
  if (index != Session::noRecord) recorded_.push_back(index);
}

void CatalogueCheck::onEndOfTranslationUnit() {
  for (size_t index : recorded_) {
    const Recorded& record = session_->record(index);
    if (record.hidden) continue;
    {
      DiagnosticBuilder warning = diag(record.where, "%0");
      warning << record.explanation;
      for (const FixItHint& fix : session_->fixesOf(index)) warning << fix;
    }
    for (const auto& [loc, note] : session_->notesOf(index)) diag(loc, note, DiagnosticIDs::Note);
  }
  recorded_.clear();
}

}  // namespace fabricize::tidy
