// Printing goes through rank zero, so N ranks do not print N copies.
#include "Edits.h"
#include "Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

Rule makeRankZeroPrintRule(const FabricOptions&) {
  // A default argument (`void dump(std::ostream& out = std::cout)`) is not a
  // print: it is a declaration, where no Fabric is in scope; the print is
  // the call that uses it, in its caller.
  auto cout = declRefExpr(to(varDecl(hasName("::std::cout"))),
                          inFabricScope(), unless(onOneRankOnly()), unless(hasAncestor(parmVarDecl())))
                  .bind("stream");
  auto printf = callExpr(callee(functionDecl(hasAnyName("::printf", "::std::printf"))),
                         callee(expr(ignoringImplicit(declRefExpr().bind("callee")))),
                         inFabricScope(), unless(onOneRankOnly()));
  auto explain = cat("print on rank 0 only, so N ranks do not print N copies");
  // Output of training code goes through rank zero; a helper that uses no
  // LibTorch (a usage message) does too when it can get the Fabric, and is
  // left as it is otherwise.
  auto training = hasAncestor(trainingFunction());
  auto toPrint = changeTo(node("stream"), edits::fabricMember("print()"));
  auto toPrintf = changeTo(node("callee"), edits::fabricMember("printf"));
  return {"fabric-rank-zero-print", "+",
          "std::cout becomes fabric.print() (a stream that writes on global rank 0 only) and "
          "printf becomes fabric.printf.",
          RuleKind::Rewrite,
          applyFirst<std::string>({
              makeRule(declRefExpr(cout, training), toPrint, explain),
              makeRule(callExpr(printf, training), toPrintf, explain),
              makeRule(cout, edits::optionalEdit(toPrint), explain),
              makeRule(printf, edits::optionalEdit(toPrintf), explain),
          })};
}

}  // namespace fabricize
