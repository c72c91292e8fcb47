// Diagnostic: a training loop whose data the migration cannot split across
// ranks (DataLoops.h found no shape it shards: full-batch training on one
// tensor, a counter that also decides when to step, data read through
// something the tool does not follow), and a loader class of the project's
// own whose epoch the tool cannot tie to its index list. As migrated, every
// rank trains on all of that data: in sync, N times the work for no
// speed-up. The finding names why and the exact change to make.
#include "rule-helpers/DataLoops.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"
#include "rule-helpers/Threading.h"

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;
using MatchResult = ast_matchers::MatchFinder::MatchResult;

namespace {

AST_MATCHER(Stmt, trainingLoopNeedingPerson) {
  clang::ASTContext& context = Finder->getASTContext();
  if (!dataloops::isTrainingDataLoop(Node, context)) return false;
  const dataloops::LoopPlan& plan = dataloops::planFor(Node, context);
  return plan.kind == dataloops::LoopPlan::NeedsPerson || !plan.runsOutKey.empty();
}

AST_MATCHER(CXXRecordDecl, unclearLoaderClass) {
  const dataloops::LoaderClassPlan& plan = dataloops::loaderClassPlan(Node, Finder->getASTContext());
  return plan.where.isValid() && !plan.clear && !plan.sharded;
}

// A loop counting its own passes over a loader class defined in another
// file: reported only if that file shards the class as one that runs out
// (fabric-shard-loader-class provides the key).
EditGenerator reportedIfClassRunsOut() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* loop = result.Nodes.getNodeAs<Stmt>("loop");
    const dataloops::LoopPlan& plan = dataloops::planFor(*loop, *result.Context);
    if (!plan.runsOutKey.empty())
      threading::recordNeed({plan.runsOutKey, plan.loaderClass->getQualifiedNameAsString(), "", /*uses=*/false});
    return llvm::SmallVector<Edit, 1>();
  };
}

}  // namespace

Rule makeOwnDataLoaderRule() {
  // A loop over a template parameter is judged in its instantiations: a
  // header's template that one translation unit instantiates with a loader
  // is not reported from another that includes it without instantiating it.
  auto dependentRange = cxxForRangeStmt(hasRangeInit(expr(isTypeDependent())));
  auto loop = stmt(anyLoop(), trainingLoopNeedingPerson(), unless(dependentRange), unless(hasAncestor(dependentRange)),
                   inFabricScope())
                  .bind("loop");
  auto loader = cxxRecordDecl(isDefinition(), unless(isExpansionInSystemHeader()), unclearLoaderClass()).bind("class");
  auto explainLoop = run([](const MatchResult& result) -> llvm::Expected<std::string> {
    const auto* loop = result.Nodes.getNodeAs<Stmt>("loop");
    const dataloops::LoopPlan& plan = dataloops::planFor(*loop, *result.Context);
    if (plan.outrunsShare)
      return "this training loop runs more passes than its rank's share of the data holds: " + plan.reason +
             ". As migrated, each rank asks its loader for batches its share does not have. " + plan.edit;
    return "this training loop's data is not split across ranks: " + plan.reason +
           ". As migrated, every rank trains on all of it (in sync, N times the work, no speed-up). " + plan.edit;
  });
  auto explainClass = run([](const MatchResult& result) -> llvm::Expected<std::string> {
    const auto* record = result.Nodes.getNodeAs<CXXRecordDecl>("class");
    const dataloops::LoaderClassPlan& plan = dataloops::loaderClassPlan(*record, *result.Context);
    return "a data loader of the project's own, `" + plan.name + "`, hands out batches by position in `" + plan.member +
           "`, but it " + plan.reason +
           "; as migrated, every rank reads all of its data (N times the work). Shard it here: " + plan.edit +
           ", or draw each epoch's indices with fabric::DistributedIndexSampler (<fabric/index_sampler.h>)";
  });
  auto where = [](const MatchResult& result) -> llvm::Expected<CharSourceRange> {
    const auto* record = result.Nodes.getNodeAs<CXXRecordDecl>("class");
    const dataloops::LoaderClassPlan& plan = dataloops::loaderClassPlan(*record, *result.Context);
    return CharSourceRange::getCharRange(plan.where, plan.where);
  };
  return {"fabric-own-dataloader", "+",
          "Report a training loop whose data the migration cannot split across ranks (full-batch training, a "
          "counter that also decides when to step, data the tool does not follow) and a loader class of the "
          "project's own it cannot shard: every rank would train on all of the data. The finding says why and the "
          "exact change.",
          RuleKind::Diagnostic,
          applyFirst<std::string>({
              makeRule(loader, noopEdit(where), explainClass),
              makeRule(loop, flatten(reportedIfClassRunsOut(), noopEdit(node("loop"))), explainLoop),
          })};
}

}  // namespace fabricize
