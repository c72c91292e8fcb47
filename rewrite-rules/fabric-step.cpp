// The optimizer steps through the Fabric: under ddp that is optimizer.step(),
// under the sharded strategies (zero1/zero2) it also re-gathers the
// parameters each rank updated, and under 16-mixed it honours the loss
// scaler's skip. One migrated loop then runs under every strategy, the one
// chosen at run time (LT_STRATEGY, fabric-run --strategy) included.
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

Rule makeStepRule() {
  auto stepCall = cxxMemberCallExpr(
      callee(cxxMethodDecl(hasName("step"), ofClass(cxxRecordDecl(isSameOrDerivedFrom("::torch::optim::Optimizer"))))),
      inFabricScope());
  // `optimizer.step()`, or `optimizer->step()` through a pointer (raw or
  // smart): fabric.step takes the optimizer itself.
  auto byValue = expr(hasType(valueOrReference(optimizerType())));
  auto optimizerStep = cxxMemberCallExpr(stepCall, on(byValue.bind("optimizer")));
  auto pointerStep = cxxMemberCallExpr(
      stepCall, on(ignoringParenImpCasts(
                    anyOf(cxxOperatorCallExpr(hasOverloadedOperatorName("->"), hasArgument(0, expr().bind("pointer"))),
                          expr(unless(byValue)).bind("pointer")))));
  auto explain =
      cat("step through the Fabric, so every strategy (sharded ones re-gather the "
          "parameters) and the loss scaler see it");
  return {"fabric-step", "5",
          "optimizer.step() becomes fabric.step(optimizer) (and step(closure) "
          "fabric.step(optimizer, closure)): the same under ddp, and what the sharded strategies "
          "need to re-gather the parameters each rank updated.",
          RuleKind::Rewrite,
          applyFirst<std::string>({
              makeRule(cxxMemberCallExpr(optimizerStep, hasArgument(0, cxxDefaultArgExpr())).bind("call"),
                       changeTo(node("call"), cat(edits::fabricMember("step("), node("optimizer"), ")")), explain),
              makeRule(cxxMemberCallExpr(optimizerStep, argumentCountIs(0)).bind("call"),
                       changeTo(node("call"), cat(edits::fabricMember("step("), node("optimizer"), ")")), explain),
              // Only the text before the arguments changes, so that edits inside
              // them (a closure's autocast scope) apply in the same run.
              makeRule(cxxMemberCallExpr(optimizerStep).bind("call"),
                       changeTo(enclose(before(node("call")), before(callArgs("call"))),
                                cat(edits::fabricMember("step("), node("optimizer"), ", ")),
                       explain),
              makeRule(cxxMemberCallExpr(pointerStep, anyOf(argumentCountIs(0), hasArgument(0, cxxDefaultArgExpr())))
                           .bind("call"),
                       changeTo(node("call"), cat(edits::fabricMember("step(*"), node("pointer"), ")")), explain),
              makeRule(cxxMemberCallExpr(pointerStep).bind("call"),
                       changeTo(enclose(before(node("call")), before(callArgs("call"))),
                                cat(edits::fabricMember("step(*"), node("pointer"), ", ")),
                       explain),
          })};
}

}  // namespace fabricize
