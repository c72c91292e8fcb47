// Issue 37: the migration report's "data" line for every training loop:
// where its batches come from after the migration, and whether each rank
// trains on its share. A Note: never a finding, never an edit, never in
// lint, the LSP server or clang-tidy; the report counts them.
//   sharded: ...         the loop's data is split across ranks
//   per rank: ...        the loop draws its batches, each rank its own
//   needs a person: ...  every rank would read all of it (fabric-own-dataloader says how to fix it)
//   not a data loop: ... nothing per step to split
#include "rule-helpers/DataLoops.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;
using MatchResult = ast_matchers::MatchFinder::MatchResult;

namespace {

AST_MATCHER(Stmt, trainingLoopOfItsFunction) { return dataloops::isTrainingDataLoop(Node, Finder->getASTContext()); }

}  // namespace

Rule makeDataLoopRule() {
  // A loop over a template parameter is judged in its instantiations.
  auto dependentRange = cxxForRangeStmt(hasRangeInit(expr(isTypeDependent())));
  auto loop = stmt(anyLoop(), trainingLoopOfItsFunction(), unless(dependentRange), unless(hasAncestor(dependentRange)),
                   inFabricScope())
                  .bind("loop");
  auto explain = run([](const MatchResult& result) -> llvm::Expected<std::string> {
    const auto* loop = result.Nodes.getNodeAs<Stmt>("loop");
    const dataloops::LoopPlan& plan = dataloops::planFor(*loop, *result.Context);
    switch (plan.kind) {
      case dataloops::LoopPlan::FabricLoader:
        return std::string("sharded: its batches come from a loader the Fabric sets up (a distributed sampler)");
      case dataloops::LoopPlan::AlreadySharded:
        return std::string("sharded: the loop already splits its work by rank");
      case dataloops::LoopPlan::IndexRange:
        return std::string("sharded: each rank takes its positions (fabric.shard_range)");
      case dataloops::LoopPlan::Elements:
        return std::string("sharded: each rank takes its elements (fabric.shard_elements)");
      case dataloops::LoopPlan::OwnLoader:
        return "loader class `" + plan.loaderClass->getQualifiedNameAsString() +
               "`: sharded where the class is defined (fabric-shard-loader-class)";
      case dataloops::LoopPlan::PerRankDraws:
        return std::string(
            "per rank: the loop draws its own batches, each rank from its own stream "
            "(fabric.per_rank_random())");
      case dataloops::LoopPlan::NeedsPerson:
        return "needs a person: " + plan.reason;
      case dataloops::LoopPlan::Covered:
        return std::string("sharded: its data comes from the loop around it");
      case dataloops::LoopPlan::NotData:
        return "not a data loop: " + (plan.reason.empty() ? std::string("it reads no data per step") : plan.reason);
    }
    return std::string();
  });
  return {"fabric-data-loop", "+",
          "Note, for the migration report, where each training loop's batches come from after the migration: "
          "sharded (a Fabric loader, shard_range, shard_elements, a sharded loader class), drawn per rank, needing "
          "a person, or not a data loop.",
          RuleKind::Note, makeRule(loop, noopEdit(node("loop")), explain)};
}

}  // namespace fabricize
