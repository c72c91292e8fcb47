// Step 4 (continued): `if (torch::cuda::is_available()) { model->to(kCUDA); }`
// holds nothing but moves fabric-device-move removes, so the whole `if` goes
// instead of leaving an empty block behind.
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

Rule makeCudaGuardRule() {
  auto batchVar = ignoringParenImpCasts(declRefExpr(to(varDecl().bind("guardVar"))));
  auto sameVar = ignoringParenImpCasts(declRefExpr(to(varDecl(equalsBoundNode("guardVar")))));
  // `data = data.cuda();` where data came from the loader.
  auto batchSelfMove =
      cxxOperatorCallExpr(hasOverloadedOperatorName("="), hasArgument(0, batchVar), hasArgument(0, loaderBatch()),
                          hasArgument(1, spelledAs(tensorDeviceMove(sameVar, "guardDevice"))));
  // `model->to(device);` on a model the Fabric sets up (no dtype argument).
  auto setUpModuleMove =
      cxxMemberCallExpr(callee(cxxMethodDecl(hasName("to"), ofClass(moduleClass()))),
                        hasArgument(0, deviceArgument("guardModuleDevice")), on(moduleReference("guardModule")),
                        isSetUpModule("guardModule"), unless(hasArgument(1, expr(hasType(scalarTypeEnum())))));
  auto removable = asStatement(stmt(anyOf(batchSelfMove, setUpModuleMove)));
  auto guard = ifStmt(hasCondition(mentionsCudaAvailable()), unless(hasElse(stmt())),
                      unless(hasConditionVariableStatement(declStmt())),
                      hasThen(anyOf(compoundStmt(unless(has(stmt(unless(removable))))), removable)), isWholeStatement(),
                      inFabricScope())
                   .bind("if");
  return {"fabric-cuda-guard", "4",
          "Remove `if (torch::cuda::is_available()) { ... }` blocks that only move the set-up "
          "model or loader batches to CUDA: the Fabric chooses the device.",
          RuleKind::Rewrite,
          makeRule(guard, edits::removeStatement("if"),
                   cat("the Fabric chooses the device; this block only moved what it already moves"))};
}

}  // namespace fabricize
