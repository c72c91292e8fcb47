// Printing goes through rank zero, so N ranks do not print N copies.
#include "Edits.h"
#include "Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

Rule makeRankZeroPrintRule(const FabricOptions&) {
  auto cout = declRefExpr(to(varDecl(hasName("::std::cout"))), unless(isInTemplateInstantiation()),
                          inFabricScope(), unless(onOneRankOnly()))
                  .bind("stream");
  auto printf = callExpr(callee(functionDecl(hasAnyName("::printf", "::std::printf"))),
                         callee(expr(ignoringImplicit(declRefExpr().bind("callee")))),
                         unless(isInTemplateInstantiation()), inFabricScope(), unless(onOneRankOnly()));
  auto explain = cat("print on rank 0 only, so N ranks do not print N copies");
  return {"fabric-rank-zero-print", "+",
          "std::cout becomes fabric.print() (a stream that writes on global rank 0 only) and "
          "printf becomes fabric.printf.",
          RuleKind::Rewrite,
          applyFirst<std::string>({
              makeRule(cout, changeTo(node("stream"), edits::fabricMember("print()")), explain),
              makeRule(printf, changeTo(node("callee"), edits::fabricMember("printf")), explain),
          })};
}

}  // namespace fabricize
