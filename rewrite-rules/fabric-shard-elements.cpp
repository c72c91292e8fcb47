// Issue 37: a range-for over a container of prepared batches or samples
// every rank holds alike (token windows, image paths, (x, y) pairs) runs
// over this rank's elements:
//   for (auto& batch : batches)
//   for (auto& batch : fabric.shard_elements(batches))
// A view of the container by reference (an rvalue container is owned by it),
// strided across ranks, the same count on every rank while training and
// every element once in an evaluation. A `std::shuffle` of the container in
// the loops around becomes `fabric.shuffle` (rank 0's order on every rank).
#include "rule-helpers/DataLoops.h"
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

#include "clang/Lex/Lexer.h"

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;
using MatchResult = ast_matchers::MatchFinder::MatchResult;

namespace {
AST_MATCHER(Stmt, plannedAsElements) {
  return dataloops::planFor(Node, Finder->getASTContext()).kind == dataloops::LoopPlan::Elements;
}
}  // namespace

Rule makeShardElementsRule() {
  auto loop = cxxForRangeStmt(plannedAsElements(), inFabricScope()).bind("loop");
  auto shard = [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* loop = result.Nodes.getNodeAs<Stmt>("loop");
    const dataloops::LoopPlan& plan = dataloops::planFor(*loop, *result.Context);
    const SourceManager& sm = *result.SourceManager;
    CharSourceRange range = Lexer::makeFileCharRange(CharSourceRange::getTokenRange(plan.range->getSourceRange()), sm,
                                                     result.Context->getLangOpts());
    if (range.isInvalid())
      return llvm::createStringError(llvm::inconvertibleErrorCode(), "the loop's range is not in the file");
    std::string fabric = edits::fabricNameAt(result);
    Edit open, close;
    open.Range = CharSourceRange::getCharRange(range.getBegin(), range.getBegin());
    open.Replacement = fabric + ".shard_elements(";
    close.Range = CharSourceRange::getCharRange(range.getEnd(), range.getEnd());
    close.Replacement = ")";
    llvm::SmallVector<Edit, 1> out{open, close};
    for (Edit& edit : dataloops::agreementEdits(plan.agreements, fabric, result)) out.push_back(edit);
    return out;
  };
  auto explain = run([](const MatchResult& result) -> llvm::Expected<std::string> {
    const auto* loop = result.Nodes.getNodeAs<Stmt>("loop");
    const dataloops::LoopPlan& plan = dataloops::planFor(*loop, *result.Context);
    std::string text = plan.training ? "each rank trains on its share of these elements (every world_size()-th from "
                                       "its rank, the same count on every rank): N ranks, 1/N of the work each"
                                     : "each rank evaluates its share of these elements, each exactly once over all "
                                       "ranks; the sums read after the loop are all-reduced";
    if (!plan.agreements.empty()) text += "; the container's shuffle is rank 0's on every rank";
    return text;
  });
  return {"fabric-shard-elements", "+",
          "Give each rank its share of a range-for over a container every rank holds (prepared batches, samples, "
          "file names): `for (auto& b : fabric.shard_elements(batches))`; its `std::shuffle` becomes "
          "`fabric.shuffle` (rank 0's order).",
          RuleKind::Rewrite, makeRule(loop, shard, explain)};
}

}  // namespace fabricize
