// Step 5: backward goes through the Fabric (precision, gradient sync).
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

Rule makeBackwardRule() {
  auto tensorBackward =
      cxxMemberCallExpr(callee(cxxMethodDecl(hasName("backward"), ofClass(tensorClass()))), on(expr().bind("loss")));
  auto withoutArguments = hasArgument(0, cxxDefaultArgExpr());
  auto autogradBackward = callExpr(
      callee(functionDecl(hasName("::torch::autograd::backward"))),
      // `{loss}` reaches the parameter through vector's initializer_list constructor.
      hasArgument(0, expr(hasDescendant(initListExpr(hasInit(0, expr().bind("loss")), unless(hasInit(1, expr())))))),
      hasArgument(1, cxxDefaultArgExpr()));
  auto explain = cat("backward through the Fabric so gradients are synchronised across ranks");
  return {"fabric-backward", "5",
          "Replace loss.backward(...) and torch::autograd::backward({loss}) with "
          "fabric.backward(loss, ...), arguments kept.",
          RuleKind::Rewrite,
          applyFirst<std::string>({
              makeRule(cxxMemberCallExpr(tensorBackward, withoutArguments, inFabricScope()).bind("call"),
                       changeTo(node("call"), cat(edits::fabricMember("backward("), node("loss"), ")")), explain),
              makeRule(cxxMemberCallExpr(tensorBackward, inFabricScope()).bind("call"),
                       changeTo(node("call"),
                                cat(edits::fabricMember("backward("), node("loss"), ", ", callArgs("call"), ")")),
                       explain),
              makeRule(callExpr(autogradBackward, inFabricScope()).bind("call"),
                       changeTo(node("call"), cat(edits::fabricMember("backward("), node("loss"), ")")), explain),
          })};
}

}  // namespace fabricize
