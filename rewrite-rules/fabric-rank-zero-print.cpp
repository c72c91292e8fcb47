// Printing goes through rank zero, so N ranks do not print N copies.
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

namespace {

// The index of a call's first defaulted argument when that default is
// std::cout (`void dump(std::ostream& out = std::cout)` called `dump()`):
// the print happens in the caller, which passes the rank-zero stream
// explicitly. -1 when there is none.
int defaultedCoutArgument(const clang::CallExpr& call) {
  for (unsigned i = 0; i < call.getNumArgs(); ++i) {
    const auto* defaulted = llvm::dyn_cast<clang::CXXDefaultArgExpr>(call.getArg(i));
    if (!defaulted) continue;
    const auto* ref = llvm::dyn_cast<clang::DeclRefExpr>(defaulted->getExpr()->IgnoreParenImpCasts());
    const auto* var = ref ? llvm::dyn_cast<clang::VarDecl>(ref->getDecl()) : nullptr;
    return var && var->getQualifiedNameAsString() == "std::cout" ? static_cast<int>(i) : -1;
  }
  return -1;
}

AST_MATCHER(clang::CallExpr, printsToCoutByDefault) { return defaultedCoutArgument(Node) >= 0; }

// `args.dump()` -> `args.dump(fabric.print())`.
EditGenerator passRankZeroStream() {
  return [](const clang::ast_matchers::MatchFinder::MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* call = result.Nodes.getNodeAs<clang::CallExpr>("printingCall");
    int index = defaultedCoutArgument(*call);
    Edit edit;
    edit.Range = clang::CharSourceRange::getCharRange(call->getRParenLoc(), call->getRParenLoc());
    edit.Replacement = std::string(index > 0 ? ", " : "") + edits::fabricNameAt(result) + ".print()";
    return llvm::SmallVector<Edit, 1>{edit};
  };
}

}  // namespace

Rule makeRankZeroPrintRule() {
  // A default argument (`void dump(std::ostream& out = std::cout)`) is not a
  // print: it is a declaration, where no Fabric is in scope; the print is
  // the call that uses it, in its caller.
  // Output on an error path (a message before a non-zero return, exit or
  // abort; a catch handler that fails or shows the exception) stays on
  // every rank: when rank 1 fails, its reason must show.
  auto cout = declRefExpr(to(varDecl(hasName("::std::cout"))), inFabricScope(), unless(onOneRankOnly()),
                          unless(hasAncestor(parmVarDecl())), unless(onErrorPath()))
                  .bind("stream");
  auto printf = callExpr(callee(functionDecl(hasAnyName("::printf", "::std::printf"))),
                         callee(expr(ignoringImplicit(declRefExpr().bind("callee")))), inFabricScope(),
                         unless(onOneRankOnly()), unless(onErrorPath()));
  auto explain = cat("print on rank 0 only, so N ranks do not print N copies");
  // Output of training code goes through rank zero; a helper that uses no
  // LibTorch (a usage message) does too when it can get the Fabric, and is
  // left as it is otherwise.
  auto training = hasAncestor(trainingFunction());
  auto toPrint = changeTo(node("stream"), edits::fabricMember("print()"));
  auto toPrintf = changeTo(node("callee"), edits::fabricMember("printf"));
  return {"fabric-rank-zero-print", "+",
          "std::cout becomes fabric.print() (a stream that writes on global rank 0 only), a call "
          "that prints to std::cout by default (`args.dump()`) passes fabric.print(), and printf "
          "becomes fabric.printf. Output on an error path (a message before a non-zero return, exit, "
          "abort or throw; in a catch handler that fails or shows the exception) and std::cerr stay "
          "on every rank.",
          RuleKind::Rewrite,
          applyFirst<std::string>({
              makeRule(declRefExpr(cout, training), toPrint, explain),
              // A helper that prints to std::cout by default (a vendored
              // parser's dump()): the call passes the rank-zero stream.
              makeRule(callExpr(printsToCoutByDefault(), unless(cxxOperatorCallExpr()), inFabricScope(),
                                unless(onOneRankOnly()), training, unless(isExpansionInSystemHeader()))
                           .bind("printingCall"),
                       passRankZeroStream(), explain),
              makeRule(callExpr(printf, training), toPrintf, explain),
              makeRule(cout, edits::optionalEdit(toPrint), explain),
              makeRule(printf, edits::optionalEdit(toPrintf), explain),
          })};
}

}  // namespace fabricize
