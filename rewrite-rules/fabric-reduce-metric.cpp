// Metrics keep their meaning. A loop over a Fabric loader (or any loop whose
// data the migration splits across ranks: DataLoops.h) sees this rank's
// shard of the data, so what it sums per batch (`total_loss +=
// loss.item<double>() * batch_size`, `correct += ...`, `++batches`) is this
// rank's part. Where the sum is read after the loop (divided by the data
// set's size, printed), it is all-reduced first:
//   total_loss = fabric.all_reduce(total_loss, fabric::ReduceOp::Sum);
// so every rank holds the whole data set's sum, as one process did.
// Only sums started afresh for each pass of the loop are reduced; a running
// total kept across passes (a global step count) is left alone. A sum
// divided by a loader class's count of this rank's share (`total /
// loader.num_batches()`) gets the count summed too.
#include "rule-helpers/DataLoops.h"
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "rule-helpers/Metrics.h"
#include "rule-helpers/Statements.h"
#include "RuleFactories.h"
#include "rule-helpers/Threading.h"

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

// The loops of the function over split data that begin after `loop` ends.
std::vector<const Stmt*> laterShardedLoops(const Stmt& loop, const FunctionDecl& function, ASTContext& context) {
  using namespace ast_matchers;
  const SourceManager& sm = context.getSourceManager();
  std::vector<const Stmt*> loops;
  for (const BoundNodes& nodes :
       ast_matchers::match(functionDecl(forEachDescendant(stmt(anyLoop(), dataloops::shardedDataLoop()).bind("later"))),
                           function, context)) {
    const auto* other = nodes.getNodeAs<Stmt>("later");
    if (other != &loop &&
        sm.isBeforeInTranslationUnit(sm.getExpansionLoc(loop.getEndLoc()), sm.getExpansionLoc(other->getBeginLoc())))
      loops.push_back(other);
  }
  return loops;
}

// A sum that a later loop of the function over split data goes on adding to
// (an evaluation over two tensors into one total) is reduced once, after
// that loop: reduced after both, the first part would count N times.
std::vector<const VarDecl*> laterSumsRemoved(const Stmt& loop, std::vector<const VarDecl*> sums,
                                             const FunctionDecl& function, ASTContext& context) {
  for (const Stmt* other : laterShardedLoops(loop, function, context)) {
    std::vector<const VarDecl*> theirs = metrics::accumulatorsOf(*other, *function.getBody(), context);
    llvm::erase_if(sums, [&](const VarDecl* v) { return llvm::is_contained(theirs, v); });
  }
  return sums;
}

// The share measures (dataloops::shareMeasures) that divide a reduced sum
// after the loop: `total / train.num_batches()`.
std::vector<const CallExpr*> divisorsOf(const std::vector<const VarDecl*>& sums, const Stmt& loop,
                                        const FunctionDecl& function, const CXXRecordDecl& loaderClass,
                                        ASTContext& context) {
  const SourceManager& sm = context.getSourceManager();
  std::vector<const CallExpr*> out;
  auto namesSum = [&](const Stmt* s) {
    bool found = false;
    statements::forEach(
        s,
        [&](const Stmt& node) {
          if (const auto* ref = dyn_cast<DeclRefExpr>(&node))
            found = found || llvm::is_contained(sums, dyn_cast<VarDecl>(ref->getDecl()));
        },
        /*intoLambdas=*/false);
    return found;
  };
  statements::forEach(
      function.getBody(),
      [&](const Stmt& s) {
        const auto* division = dyn_cast<BinaryOperator>(&s);
        if (!division || (division->getOpcode() != BO_Div && division->getOpcode() != BO_DivAssign) ||
            !sm.isBeforeInTranslationUnit(sm.getExpansionLoc(loop.getEndLoc()),
                                          sm.getExpansionLoc(division->getBeginLoc())) ||
            !namesSum(division->getLHS()))
          return;
        for (const CallExpr* measure : dataloops::shareMeasures(division->getRHS(), loaderClass, context))
          if (!llvm::is_contained(out, measure)) out.push_back(measure);
      },
      /*intoLambdas=*/false);
  return out;
}

// The names of what is all-reduced after the loop: its sums (locals), then
// the members it sums afresh each call (metrics::memberSumsOf).
std::vector<std::string> reducedNames(const Stmt& loop, const FunctionDecl& function, ASTContext& context) {
  std::vector<std::string> names;
  for (const VarDecl* var :
       laterSumsRemoved(loop, metrics::accumulatorsOf(loop, *function.getBody(), context), function, context))
    names.push_back(var->getName().str());
  // A member a later loop of the function over split data adds to as well
  // is reduced once, after that loop (as laterSumsRemoved's locals).
  std::vector<const FieldDecl*> members = metrics::memberSumsOf(loop, function, context);
  for (const Stmt* other : laterShardedLoops(loop, function, context)) {
    std::vector<const FieldDecl*> theirs = metrics::membersAccumulatedIn(*other);
    llvm::erase_if(members, [&](const FieldDecl* field) { return llvm::is_contained(theirs, field); });
  }
  for (const FieldDecl* field : members) names.push_back(field->getName().str());
  return names;
}

EditGenerator reduceAfterLoop() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* loop = result.Nodes.getNodeAs<Stmt>("loop");
    const auto* function = result.Nodes.getNodeAs<FunctionDecl>("function");
    std::vector<const VarDecl*> sums = laterSumsRemoved(
        *loop, metrics::accumulatorsOf(*loop, *function->getBody(), *result.Context), *function, *result.Context);
    std::vector<std::string> names = reducedNames(*loop, *function, *result.Context);
    if (names.empty()) return llvm::SmallVector<Edit, 1>();
    // Over a loader class of the project's own: only if that class is
    // sharded, which the file that defines it decides (Threading.h).
    const dataloops::LoopPlan& plan = dataloops::planFor(*loop, *result.Context);
    if (plan.kind == dataloops::LoopPlan::OwnLoader)
      threading::recordNeed({dataloops::loaderClassKey(*plan.loaderClass), plan.loaderClass->getQualifiedNameAsString(),
                             "",
                             /*uses=*/false});
    const SourceManager& sm = *result.SourceManager;
    std::string indent = edits::indentationAt(loop->getBeginLoc(), sm);
    std::string fabric = edits::fabricNameAt(result);
    std::string statements;
    for (const std::string& name : names) {
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
    llvm::SmallVector<Edit, 1> edits{edit};
    // `total / loader.num_batches()`: the loader class's share; divided by
    // the sum over the ranks, as the sum is.
    if (plan.kind == dataloops::LoopPlan::OwnLoader)
      for (const CallExpr* measure : divisorsOf(sums, *loop, *function, *plan.loaderClass, *result.Context)) {
        CharSourceRange range = Lexer::makeFileCharRange(CharSourceRange::getTokenRange(measure->getSourceRange()), sm,
                                                         result.Context->getLangOpts());
        if (range.isInvalid()) continue;
        Edit before, after;
        before.Range = CharSourceRange::getCharRange(range.getBegin(), range.getBegin());
        before.Replacement = fabric + ".all_reduce(";
        after.Range = CharSourceRange::getCharRange(range.getEnd(), range.getEnd());
        after.Replacement = ", fabric::ReduceOp::Sum)";
        edits.push_back(before);
        edits.push_back(after);
      }
    return edits;
  };
}

Stencil explainSums() {
  return run([](const MatchResult& result) -> llvm::Expected<std::string> {
    const auto* loop = result.Nodes.getNodeAs<Stmt>("loop");
    const auto* function = result.Nodes.getNodeAs<FunctionDecl>("function");
    std::string names;
    for (const std::string& name : reducedNames(*loop, *function, *result.Context))
      names += (names.empty() ? "" : ", ") + name;
    return "this loop sees one rank's shard of the data: the sums read after it (" + names +
           ") are all-reduced so they cover the whole data set, as with one process";
  });
}

}  // namespace

using dataloops::shardedDataLoop;

Rule makeReduceMetricRule() {
  auto shardedLoop =
      stmt(anyLoop(), shardedDataLoop(), hasAncestor(functionDecl(hasBody(compoundStmt())).bind("function")));
  return {"fabric-reduce-metric", "+",
          "Sums a loop over a Fabric loader (or any loop whose data the migration splits across ranks) "
          "accumulates per batch and reads after the loop (a total loss, a count of correct predictions, a "
          "sample count) are all-reduced right after the loop (after the last, when several loops add to one "
          "sum), so metrics divided by the data set's size keep their meaning on several ranks; a division by a "
          "sharded loader class's own count of its share is divided by that count summed over the ranks.",
          RuleKind::Rewrite,
          applyFirst<std::string>({
              makeRule(stmt(shardedLoop, hasParent(compoundStmt())).bind("loop"), reduceAfterLoop(), explainSums()),
          })};
}

}  // namespace fabricize
