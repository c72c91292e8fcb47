// Diagnostic: a training loop left (`break`, `return`, `continue`, or the
// loop's own condition) on a value that differs between ranks — this rank's
// loss, a metric of its shard — lets one rank stop while the others wait for
// it in the next gradient all-reduce. A person decides how the ranks agree
// (all-reduce the value first); the runtime ends such a job with a message
// naming the ranks, but only once it has happened.
#include "rule-helpers/Matchers.h"
#include "rule-helpers/Metrics.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;

namespace {

// A condition computed from this rank's data: `loss.item<double>() < 1e-3`,
// `epoch_loss < best` where epoch_loss came from the model's outputs and was
// not all-reduced. Not a shape, nor a tensor read from a file (Metrics.h).
AST_MATCHER(Expr, perRankCondition) { return metrics::isPerRankValue(Node, Finder->getASTContext()); }

}  // namespace

Rule makeDivergentExitRule() {
  auto inTrainingLoop = hasAncestor(trainingLoop());
  auto exit = stmt(anyOf(breakStmt(), continueStmt(), returnStmt()),
                   hasAncestor(ifStmt(hasCondition(expr(perRankCondition()).bind("condition")), inTrainingLoop)),
                   inFabricScope())
                  .bind("exit");
  auto loopCondition = stmt(anyOf(whileStmt(hasCondition(expr(perRankCondition()).bind("condition"))),
                                  doStmt(hasCondition(expr(perRankCondition()).bind("condition"))),
                                  forStmt(hasCondition(expr(perRankCondition()).bind("condition")))),
                            hasDescendant(backwardCall()), inFabricScope())
                           .bind("exit");
  auto explain = cat("this leaves a training loop on a value that differs between ranks (", node("condition"),
                     "): one rank can stop while the others wait for it in the next gradient "
                     "all-reduce; make the ranks agree first, e.g. `value = fabric.all_reduce(value, "
                     "fabric::ReduceOp::Mean);` before the test");
  return {"fabric-divergent-exit", "+",
          "Report a break, continue or return out of a training loop (and a training loop's own "
          "condition) that depends on a per-rank value such as this rank's loss: on several ranks "
          "one would stop while the others wait for it in the gradient all-reduce. All-reduce the "
          "value first.",
          RuleKind::Diagnostic,
          applyFirst<std::string>({
              makeRule(exit, noopEdit(node("exit")), explain),
              makeRule(loopCondition, noopEdit(node("condition")), explain),
          })};
}

}  // namespace fabricize
