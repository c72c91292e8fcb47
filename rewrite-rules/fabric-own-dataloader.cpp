// Diagnostic: a training loop whose data the migration cannot split across
// ranks (DataLoops.h found no shape it shards: full-batch training on one
// tensor, a counter that also decides when to step, data read through
// something the tool does not follow), and a loader class of the project's
// own whose epoch the tool cannot tie to its index list. As migrated, every
// rank trains on all of that data: in sync, N times the work for no
// speed-up. The finding names why and the exact change to make.
#include "DataLoops.h"
#include "Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;
using MatchResult = ast_matchers::MatchFinder::MatchResult;

namespace {

AST_MATCHER(Stmt, trainingLoopNeedingPerson) {
  clang::ASTContext& context = Finder->getASTContext();
  if (!dataloops::isTrainingDataLoop(Node, context)) return false;
  return dataloops::planFor(Node, context).kind == dataloops::LoopPlan::NeedsPerson;
}

AST_MATCHER(CXXRecordDecl, unclearLoaderClass) {
  const dataloops::LoaderClassPlan& plan = dataloops::loaderClassPlan(Node, Finder->getASTContext());
  return plan.where.isValid() && !plan.clear && !plan.sharded;
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
              makeRule(loop, noopEdit(node("loop")), explainLoop),
          })};
}

}  // namespace fabricize
