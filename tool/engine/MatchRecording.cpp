#include "engine/MatchRecording.h"

#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"

#include "clang/Tooling/Transformer/RewriteRule.h"

namespace fabricize {

using namespace clang;

namespace {

// Whether every macro location of `range` is in a macro's argument spelled
// in a file (`FZ_STMT(Trainer trainer(model))`), not in its body.
bool inMacroArguments(SourceRange range, const SourceManager& sm) {
  for (SourceLocation at : {range.getBegin(), range.getEnd()}) {
    if (at.isFileID()) continue;
    if (!sm.isMacroArgExpansion(at) || !sm.getSpellingLoc(at).isFileID()) return false;
  }
  return range.getBegin().isMacroID() || range.getEnd().isMacroID();
}

}  // namespace

std::optional<RecordedMatch> recordMatch(const Rule& rule, size_t ruleIndex,
                                         const ast_matchers::MatchFinder::MatchResult& result,
                                         const RecordingScope& scope) {
  const SourceManager& sm = *result.SourceManager;
  const auto& transformerRule = rule.rule;
  auto editable = [&](SourceLocation loc) {
    return !sm.isInSystemHeader(loc) && (!scope.editable || scope.editable(sm, loc));
  };
  size_t caseIndex = transformer::detail::findSelectedCase(result, transformerRule);
  std::string explanation;
  if (llvm::Error error = transformerRule.Metadata[caseIndex]->eval(result, &explanation))
    explanation = llvm::toString(std::move(error));

  auto root = result.Nodes.getMap().find(transformer::RootID);
  if (root == result.Nodes.getMap().end()) return std::nullopt;
  SourceRange rootRange = root->second.getSourceRange();
  RecordedMatch match;
  match.ruleId = rule.id;
  match.where = sm.getExpansionLoc(rootRange.getBegin());
  if (match.where.isInvalid() || !editable(match.where)) return std::nullopt;
  // The Fabric passed where a class is constructed, or a function called,
  // in an argument of a macro (`CHECK(Trainer trainer(model))`): its tokens
  // are the file's own, and the class or function takes the Fabric either
  // way (a construction left without it would not compile).
  const bool threadingInMacroArgument = rule.id == kThreadingRuleId && inMacroArguments(rootRange, sm);
  // Never edit inside a macro expansion: report it instead.
  if (match::inMacroExpansion(rootRange, sm) && !threadingInMacroArgument) {
    if (scope.factsOnly) return std::nullopt;
    match.explanation = "not migrated: the code is inside a macro expansion (" + explanation + "); migrate it by hand";
    match.skipped = true;
    return match;
  }
  std::vector<threading::Capture> captures;  // lambdas that must capture the Fabric the edits name
  llvm::Expected<llvm::SmallVector<transformer::Edit, 1>> edits = [&] {
    threading::NeedRecorder recorder;  // the functions whose Fabric the edits use
    auto evaluated = transformerRule.Cases[caseIndex].Edits(result);
    match.needs.needs = std::move(recorder.needs);
    captures = std::move(recorder.captures);
    return evaluated;
  }();
  if (!edits) {
    if (scope.factsOnly) return std::nullopt;
    match.explanation = "internal error: " + llvm::toString(edits.takeError());
    match.skipped = true;
    return match;
  }
  match.explanation = explanation;
  match.factOnly = scope.factsOnly;
  match.note = rule.kind == RuleKind::Note;
  for (const transformer::Edit& edit : *edits) {
    if (const auto* fact = llvm::any_cast<threading::Fact>(&edit.Metadata)) {
      // Code that reaches no LibTorch gets no runtime of its own.
      if (fact->kind == threading::Fact::Standalone && !scope.reachesLibTorch &&
          edit.Replacement.find("fabric::") != std::string::npos)
        continue;
      match.needs.facts.push_back(*fact);
      if (fact->kind == threading::Fact::Blocks) match.factOnly = true;
    }
    if (match.factOnly) continue;
    SourceLocation begin = edit.Range.getBegin();
    SourceLocation endLocation = edit.Range.getEnd();
    if (threadingInMacroArgument && begin.isMacroID() && sm.isMacroArgExpansion(begin) &&
        endLocation.isMacroID() == begin.isMacroID()) {
      begin = sm.getSpellingLoc(begin);
      endLocation = endLocation.isMacroID() ? sm.getSpellingLoc(endLocation) : endLocation;
    }
    if (!begin.isFileID() || !editable(begin)) continue;
    auto [file, offset] = sm.getDecomposedLoc(begin);
    if (edit.Kind == transformer::EditKind::AddInclude) {
      // Diagnostic and note rules never carry a fix.
      if (rule.kind == RuleKind::Rewrite) match.includeFiles.push_back(file);
      continue;
    }
    unsigned end = sm.getDecomposedLoc(endLocation).second;
    if ((end == offset && edit.Replacement.empty()) || rule.kind != RuleKind::Rewrite) {
      // A no-op edit marks what a person must look at: the finding goes there.
      match.reportOnly = true;
      match.where = begin;
      continue;
    }
    TextEdit text;
    text.offset = offset;
    text.length = end > offset ? end - offset : 0;
    text.replacement = edit.Replacement;
    text.ruleIndex = scope.editKey ? scope.editKey() : ruleIndex;
    text.ruleId = rule.id;
    text.explanation = explanation;
    text.line = sm.getSpellingLineNumber(begin);
    text.column = sm.getSpellingColumnNumber(begin);
    match.edits.push_back({file, std::move(text)});
  }
  // The captures go with the edits that need them (applied with them, or
  // not at all); matches of several edits in one lambda add one capture.
  if (!match.edits.empty() && !match.factOnly && rule.kind == RuleKind::Rewrite)
    for (const threading::Capture& capture : captures) {
      if (!capture.at.isFileID() || !editable(capture.at)) continue;
      auto [file, offset] = sm.getDecomposedLoc(capture.at);
      TextEdit text;
      text.offset = offset;
      text.replacement = capture.text;
      text.ruleIndex = scope.editKey ? scope.editKey() : ruleIndex;
      text.ruleId = rule.id;
      text.explanation = explanation + " (the lambda around it captures the Fabric it now names)";
      text.line = sm.getSpellingLineNumber(capture.at);
      text.column = sm.getSpellingColumnNumber(capture.at);
      match.edits.push_back({file, std::move(text)});
    }
  if (match.edits.empty() && !match.reportOnly && match.includeFiles.empty() && !match.factOnly) return std::nullopt;
  // Code in a function without a Fabric is migrated only if the function
  // gets one, even where the edit does not name it.
  if (scope.editsNeedFabric) edits::addScopeNeed(result, !match.edits.empty(), match.needs);
  return match;
}

std::vector<threading::Verdict> resolveMatches(const std::vector<threading::MatchNeeds>& matches, bool wholeProgram,
                                               bool threadingRuns) {
  std::vector<threading::Verdict> verdicts = threading::resolve(matches, wholeProgram);
  if (threadingRuns) return verdicts;
  for (size_t i = 0; i < matches.size(); ++i) {
    threading::Verdict& verdict = verdicts[i];
    if (!verdict.applied) continue;
    for (const threading::Need& need : matches[i].needs) {
      verdict.applied = false;
      if (need.uses && !verdict.report) {
        verdict.report = true;
        verdict.reason =
            "`" + need.name + "` needs the Fabric passed in, which check " + std::string(kThreadingRuleId) + " does";
      }
    }
    if (threading::isThreadingEdit(matches[i])) verdict = threading::Verdict{false, false, "", false};
  }
  return verdicts;
}

}  // namespace fabricize
