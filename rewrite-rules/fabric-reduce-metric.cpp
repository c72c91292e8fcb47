// Metrics keep their meaning. A loop over a Fabric loader (or any loop whose
// data the migration splits across ranks: DataLoops.h) sees this rank's
// shard of the data, so what it sums per batch (`total_loss +=
// loss.item<double>() * batch_size`, `correct += ...`, `++batches`) is this
// rank's part. Where the sum is read after the loop (divided by the data
// set's size, printed), it is all-reduced first:
//   total_loss = fabric.all_reduce(total_loss, fabric::ReduceOp::Sum);
// so every rank holds the whole data set's sum, as one process did.
// Only sums started afresh for each pass of the loop are reduced; a running
// total kept across passes (a global step count) is left alone.
#include "DataLoops.h"
#include "Edits.h"
#include "Matchers.h"
#include "Metrics.h"
#include "RuleFactories.h"
#include "Threading.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/StmtCXX.h"
#include "clang/Lex/Lexer.h"

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;

namespace {

using MatchResult = ast_matchers::MatchFinder::MatchResult;

EditGenerator reduceAfterLoop() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* loop = result.Nodes.getNodeAs<Stmt>("loop");
    const auto* function = result.Nodes.getNodeAs<FunctionDecl>("function");
    std::vector<const VarDecl*> sums = metrics::accumulatorsOf(*loop, *function->getBody(), *result.Context);
    if (sums.empty()) return llvm::SmallVector<Edit, 1>();
    // Over a loader class of the project's own: only if that class is
    // sharded, which the file that defines it decides (Threading.h).
    const dataloops::LoopPlan& plan = dataloops::planFor(*loop, *result.Context);
    if (plan.kind == dataloops::LoopPlan::OwnLoader)
      threading::recordNeed({dataloops::loaderClassKey(*plan.loaderClass), plan.loaderClass->getNameAsString(), "",
                             /*uses=*/false});
    const SourceManager& sm = *result.SourceManager;
    std::string indent = edits::indentationAt(loop->getBeginLoc(), sm);
    std::string fabric = edits::fabricNameAt(result);
    std::string statements;
    for (const VarDecl* var : sums) {
      std::string name = var->getName().str();
      statements += "\n" + indent + name + " = " + fabric + ".all_reduce(" + name + ", fabric::ReduceOp::Sum);";
    }
    Edit edit;
    SourceLocation end =
        Lexer::getLocForEndOfToken(sm.getExpansionLoc(loop->getEndLoc()), 0, sm, result.Context->getLangOpts());
    // A body without braces ends before its `;`: after it.
    bool invalid = false;
    if (const char* at = sm.getCharacterData(end, &invalid); !invalid && *at == ';') end = end.getLocWithOffset(1);
    edit.Range = CharSourceRange::getCharRange(end, end);
    edit.Replacement = statements;
    return llvm::SmallVector<Edit, 1>{edit};
  };
}

Stencil explainSums() {
  return run([](const MatchResult& result) -> llvm::Expected<std::string> {
    const auto* loop = result.Nodes.getNodeAs<Stmt>("loop");
    const auto* function = result.Nodes.getNodeAs<FunctionDecl>("function");
    std::string names;
    for (const VarDecl* var : metrics::accumulatorsOf(*loop, *function->getBody(), *result.Context))
      names += (names.empty() ? "" : ", ") + var->getName().str();
    return "this loop sees one rank's shard of the data: the sums read after it (" + names +
           ") are all-reduced so they cover the whole data set, as with one process";
  });
}

}  // namespace

namespace {

// A loop whose data the migration splits across ranks.
AST_MATCHER(Stmt, shardedDataLoop) {
  const dataloops::LoopPlan& plan = dataloops::planFor(Node, Finder->getASTContext());
  if (plan.kind == dataloops::LoopPlan::FabricLoader) return isa<CXXForRangeStmt>(Node);
  return plan.kind == dataloops::LoopPlan::IndexRange || plan.kind == dataloops::LoopPlan::Elements ||
         plan.kind == dataloops::LoopPlan::OwnLoader;
}

}  // namespace

Rule makeReduceMetricRule() {
  auto shardedLoop =
      stmt(anyLoop(), shardedDataLoop(), hasAncestor(functionDecl(hasBody(compoundStmt())).bind("function")));
  return {"fabric-reduce-metric", "+",
          "Sums a loop over a Fabric loader (or any loop whose data the migration splits across ranks) "
          "accumulates per batch and reads after the loop (a total loss, a count of correct predictions, a "
          "sample count) are all-reduced right after the loop, so metrics divided by the data set's size keep "
          "their meaning on several ranks.",
          RuleKind::Rewrite,
          applyFirst<std::string>({
              makeRule(stmt(shardedLoop, hasParent(compoundStmt())).bind("loop"), reduceAfterLoop(), explainSums()),
          })};
}

}  // namespace fabricize
