// Log files go through rank zero: N ranks opening one `std::ofstream` would
// write N copies into it, and each later open truncates what rank 0 wrote.
// The stream is opened by fabric.rank_zero_ofstream(), which opens the file
// on global rank 0 and /dev/null elsewhere; the writes stay as they are.
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"
#include "rule-helpers/Vendored.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

namespace {

auto outputFileStream() { return recordNamed("::std::basic_ofstream"); }

// What fabricize already wrote: `fabric.rank_zero_ofstream(...)`, or the
// free `fabric::rank_zero_ofstream(...)`.
auto rankZeroOpen() {
  return callExpr(callee(functionDecl(anyOf(cxxMethodDecl(hasName("rank_zero_ofstream"), ofClass(fabricClass())),
                                            hasName("::fabric::rank_zero_ofstream")))));
}

// The mode when the user wrote one, else the path: a defaulted mode is not
// in the source.
auto lastSpelledArgument() {
  return anyOf(hasArgument(1, expr(unless(cxxDefaultArgExpr())).bind("last")), hasArgument(0, expr().bind("last")));
}

// An fopen mode that writes: "w", "a", "r+", ...
AST_MATCHER(clang::StringLiteral, isWriteMode) {
  llvm::StringRef mode = Node.getString();
  return mode.contains('w') || mode.contains('a') || mode.contains('+');
}

// A function of third-party code the project carries (a JSON library's
// save_file) that opens a file for writing itself: the edit cannot go
// inside it, so its call is made on rank zero.
AST_MATCHER(clang::FunctionDecl, isVendoredFileWriter) {
  const clang::FunctionDecl* definition = Node.getDefinition();
  if (!definition || !definition->getBody()) return false;
  const clang::SourceManager& sm = Finder->getASTContext().getSourceManager();
  clang::SourceLocation at = sm.getExpansionLoc(definition->getLocation());
  if (sm.isInSystemHeader(at)) return false;
  clang::FileID file = sm.getFileID(at);
  auto entry = sm.getFileEntryRefForID(file);
  if (!entry || !isVendoredFile(entry->getName(), "", sm.getBufferData(file))) return false;
  auto writes = clang::ast_matchers::match(
      stmt(
          hasDescendant(expr(anyOf(cxxConstructExpr(hasType(outputFileStream()), hasArgument(0, expr()),
                                                    unless(hasArgument(0, hasType(outputFileStream())))),
                                   cxxMemberCallExpr(callee(cxxMethodDecl(
                                       hasName("open"), ofClass(cxxRecordDecl(hasName("::std::basic_ofstream")))))))))),
      *definition->getBody(), Finder->getASTContext());
  return !writes.empty();
}

}  // namespace

Rule makeRankZeroFileRule() {
  // `std::ofstream log(path[, mode])`, also as a member initialiser
  // `log_(config.log_path)`. The copy/move constructor (one argument of the
  // stream's own type) is not an open.
  auto opened = cxxConstructExpr(
      hasType(outputFileStream()), hasArgument(0, expr().bind("first")), lastSpelledArgument(),
      unless(hasArgument(0, hasType(outputFileStream()))), unless(hasArgument(0, spelledAs(rankZeroOpen()))),
      unless(hasArgument(0, hasDescendant(rankZeroOpen()))), inFabricScope(), unless(onOneRankOnly()));
  // `log.open(path[, mode]);` on its own line.
  auto reopened = cxxMemberCallExpr(
      callee(cxxMethodDecl(hasName("open"), ofClass(cxxRecordDecl(hasName("::std::basic_ofstream"))))),
      on(expr().bind("stream")), hasArgument(0, expr().bind("first")), lastSpelledArgument(), isWholeStatement(),
      inFabricScope(), unless(onOneRankOnly()));
  // C stdio: `fopen(path, "w")` / "a": every rank would write; no safe
  // rewrite (the FILE* may be closed, reopened, shared), so it is reported.
  auto cOpen = callExpr(callee(functionDecl(hasAnyName("::fopen", "::std::fopen"))), argumentCountIs(2),
                        hasArgument(1, ignoringParenImpCasts(stringLiteral(isWriteMode()))), inFabricScope(),
                        unless(onOneRankOnly()))
                   .bind("fopen");
  // `popen("gnuplot", "w")`: the command (drawing the loss curve into an
  // image) runs on global rank 0; other ranks get a pipe to a command that
  // discards what is written, so fprintf and pclose stay as they are. A
  // pipe the program reads from ("r") runs everywhere.
  auto pipeOpen =
      callExpr(callee(functionDecl(hasName("::popen"))), argumentCountIs(2),
               hasArgument(1, ignoringParenImpCasts(stringLiteral(isWriteMode()))),
               callee(expr(ignoringImplicit(declRefExpr().bind("callee")))), inFabricScope(), unless(onOneRankOnly()));
  auto toRankZeroPopen = changeTo(node("callee"), edits::fabricMember("rank_zero_popen"));
  auto explainPipe =
      cat("the command this pipe feeds runs on global rank 0 only (other ranks write into a pipe "
          "that discards it), so N ranks do not run N copies writing the same files");
  auto explain =
      cat("the file is written by global rank 0 only (other ranks write to /dev/null), so "
          "ranks do not write copies or truncate rank 0's file");
  auto wrapped = [](Stencil prefix) {
    return cat(prefix, edits::fabricMember("rank_zero_ofstream("), encloseNodes("first", "last"), ")");
  };
  // Where no Fabric can be passed (a logger class's constructor in a shared
  // utils/ library), the free fabric::rank_zero_ofstream decides rank zero
  // from the process's environment, as Lightning's rank_zero_only does.
  auto wrappedFree = [](Stencil prefix) {
    return cat(prefix, "fabric::rank_zero_ofstream(", encloseNodes("first", "last"), ")");
  };
  // Training code's files go through the Fabric's rank zero; other code's
  // (a logger class of the project's own) through the free function.
  auto training = hasAncestor(trainingFunction());
  auto keepsFabric =
      cxxRecordDecl(anyOf(classNeedingFabric(), has(fieldDecl(hasType(valueOrReference(fabricType()))))));
  auto openOnRankZero = changeTo(encloseNodes("first", "last"), wrapped(cat("")));
  auto reopenOnRankZero = changeTo(node("call"), wrapped(cat(node("stream"), " = ")));
  auto openOnRankZeroFree = changeTo(encloseNodes("first", "last"), wrappedFree(cat("")));
  auto reopenOnRankZeroFree = changeTo(node("call"), wrappedFree(cat(node("stream"), " = ")));
  auto vendoredWrite = callExpr(callee(functionDecl(isVendoredFileWriter())), hasAncestor(trainingFunction()),
                                inFabricScope(), unless(onOneRankOnly()))
                           .bind("write");
  auto explainVendored =
      cat("this call into third-party code writes a file: made on global rank 0 only, so "
          "ranks do not write copies");
  return {"fabric-rank-zero-file", "+",
          "A std::ofstream opened in training code (a loss log, a CSV of metrics) is opened through "
          "fabric.rank_zero_ofstream(path): the file on global rank 0, /dev/null elsewhere (the "
          "free fabric::rank_zero_ofstream where no Fabric can be passed). A call into third-party "
          "code the project carries that writes a file is made on rank 0. A pipe to a command "
          "(popen(cmd, \"w\"): gnuplot drawing the loss curve) is opened through "
          "fabric.rank_zero_popen. A C fopen for writing is reported.",
          RuleKind::Rewrite,
          applyFirst<std::string>({
              makeRule(cxxConstructExpr(opened, training), openOnRankZero, explain),
              makeRule(cxxMemberCallExpr(reopened, training).bind("call"), reopenOnRankZero, explain),
              // A class that keeps the Fabric (a trainer): through its member.
              makeRule(cxxConstructExpr(opened, hasAncestor(cxxMethodDecl(ofClass(keepsFabric)))),
                       edits::optionalEdit(openOnRankZero), explain),
              makeRule(cxxMemberCallExpr(reopened, hasAncestor(cxxMethodDecl(ofClass(keepsFabric)))).bind("call"),
                       edits::optionalEdit(reopenOnRankZero), explain),
              makeRule(opened, edits::standaloneEdit(openOnRankZeroFree), explain),
              makeRule(reopened.bind("call"), edits::standaloneEdit(reopenOnRankZeroFree), explain),
              makeRule(callExpr(vendoredWrite, isWholeStatement()),
                       insertBefore(node("write"), cat("if (", edits::fabricMember("is_global_zero()"), ") ")),
                       explainVendored),
              // Its success as a value (`if (!save_file(...)) warn();`): other
              // ranks report success without writing.
              makeRule(callExpr(vendoredWrite, hasType(booleanType())),
                       changeTo(node("write"),
                                cat("(!", edits::fabricMember("is_global_zero()"), " || ", node("write"), ")")),
                       explainVendored),
              makeRule(vendoredWrite, noopEdit(node("write")),
                       cat("this call into third-party code writes a file on every rank: make it on rank 0 "
                           "only (if (fabric.is_global_zero()) ...)")),
              makeRule(callExpr(pipeOpen, training), toRankZeroPopen, explainPipe),
              makeRule(pipeOpen, edits::optionalEdit(toRankZeroPopen), explainPipe),
              makeRule(callExpr(cOpen, training), noopEdit(node("fopen")),
                       cat("every rank opens this file for writing: open and write it on rank 0 "
                           "only (if (fabric.is_global_zero()) ...), or use a std::ofstream from "
                           "fabric.rank_zero_ofstream(path)")),
          })};
}

}  // namespace fabricize
