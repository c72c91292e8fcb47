// Issue 37: a loop over positions in data every rank holds alike (whole
// data-set tensors sliced by hand, a dataset's get(i), a vector by index)
// gives each rank its share of the positions:
//   for (int64_t i = 0; i < n; i += bs) {          x = X.slice(0, i, i + bs);
//   for (int64_t i : fabric.shard_range<int64_t>(0, n, bs)) {
// This rank's values of the original loop, strided across ranks (rank r
// takes the r-th, r+N-th... value), the same number of steps on every rank
// while training (the runtime repeats the first values to fill the last
// step, as DistributedSampler pads) and every value exactly once in an
// evaluation. A permutation the loop reads by position (`perm =
// torch::randperm(n)` per epoch, `std::shuffle(order...)`) becomes rank 0's
// on every rank (`fabric.randperm`, `fabric.shuffle`), so the shares never
// overlap. The analysis is DataLoops.h's.
#include "rule-helpers/DataLoops.h"
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

#include "clang/AST/Expr.h"
#include "clang/Lex/Lexer.h"

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;
using MatchResult = ast_matchers::MatchFinder::MatchResult;

namespace {

AST_MATCHER_P(Stmt, plannedAs, dataloops::LoopPlan::Kind, kind) {
  return dataloops::planFor(Node, Finder->getASTContext()).kind == kind;
}

}  // namespace

Rule makeShardIndexLoopRule() {
  auto loop = forStmt(plannedAs(dataloops::LoopPlan::IndexRange), inFabricScope()).bind("loop");
  auto shard = [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* loop = result.Nodes.getNodeAs<Stmt>("loop");
    const dataloops::LoopPlan& plan = dataloops::planFor(*loop, *result.Context);
    std::string fabric = edits::fabricNameAt(result);
    Edit header;
    header.Range = CharSourceRange::getCharRange(plan.headerOpen.getLocWithOffset(1), plan.headerClose);
    header.Replacement = plan.counterDeclaration + " : " + fabric + ".shard_range" + plan.rangeArguments;
    llvm::SmallVector<Edit, 1> out{header};
    for (Edit& edit : dataloops::agreementEdits(plan.agreements, fabric, result)) out.push_back(edit);
    return out;
  };
  auto explain = run([](const MatchResult& result) -> llvm::Expected<std::string> {
    const auto* loop = result.Nodes.getNodeAs<Stmt>("loop");
    const dataloops::LoopPlan& plan = dataloops::planFor(*loop, *result.Context);
    std::string text = plan.training
                           ? "each rank trains on its share of this loop's positions (every world_size()-th from its "
                             "rank, the same number of steps on every rank): N ranks, 1/N of the work each"
                           : "each rank evaluates its share of this loop's positions, every position exactly once "
                             "over all ranks; the sums read after the loop are all-reduced";
    if (!plan.agreements.empty())
      text += "; the permutation it reads by position is rank 0's on every rank, so the shares do not overlap";
    return text;
  });
  return {"fabric-shard-index-loop", "+",
          "Give each rank its share of a loop over positions in data every rank holds (`for (i = 0; i < n; i += bs) "
          "X.slice(0, i, i + bs)`, `get(i)`, `v[i]`): `for (i : fabric.shard_range<T>(0, n, bs))`; a permutation "
          "it reads by position becomes rank 0's (`fabric.randperm`, `fabric.shuffle`).",
          RuleKind::Rewrite, makeRule(loop, shard, explain)};
}

}  // namespace fabricize
