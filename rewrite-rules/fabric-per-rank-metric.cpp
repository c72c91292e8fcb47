// Diagnostic: a metric kept in an object of the program's own — a
// running-mean meter, a vector of per-batch losses — fed inside a loop over
// a Fabric loader (or any loop whose data the migration splits: DataLoops.h)
// and read after it. Each rank's object holds its shard's
// values only, so what rank 0 prints covers 1/N of the data; no edit can
// reach inside the object, so a person all-reduces what it sums.
// (fabric-reduce-metric all-reduces plain sums itself.)
#include "rule-helpers/DataLoops.h"
#include "rule-helpers/Matchers.h"
#include "rule-helpers/Metrics.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;

namespace {

using MatchResult = ast_matchers::MatchFinder::MatchResult;

// The objects the loop feeds, less the loader it takes its batches from
// (`loader.next()` changes it, `loader.size()` reads it: no tally).
std::vector<const VarDecl*> tallies(const Stmt& loop, const Stmt& functionBody, ASTContext& context) {
  std::vector<const VarDecl*> objects = metrics::perRankObjectsOf(loop, functionBody, context);
  const CXXRecordDecl* loader = dataloops::batchSourceClassOf(loop, context);
  if (const CXXRecordDecl* own = dataloops::planFor(loop, context).loaderClass) loader = own;
  if (!loader) return objects;
  llvm::erase_if(objects, [&](const VarDecl* var) {
    const CXXRecordDecl* record = var->getType().getNonReferenceType()->getAsCXXRecordDecl();
    return record && record->getCanonicalDecl() == loader->getCanonicalDecl();
  });
  return objects;
}

AST_MATCHER(Stmt, feedsPerRankObjects) {
  const FunctionDecl* function = enclosingFunction(DynTypedNode::create(Node), Finder->getASTContext());
  return function && function->getBody() &&
         (!tallies(Node, *function->getBody(), Finder->getASTContext()).empty() ||
          !metrics::perRankMembersOf(Node, *function, Finder->getASTContext()).empty());
}

Stencil explainObjects() {
  return run([](const MatchResult& result) -> llvm::Expected<std::string> {
    const auto* loop = result.Nodes.getNodeAs<Stmt>("loop");
    const auto* function = result.Nodes.getNodeAs<FunctionDecl>("function");
    std::string names;
    const PrintingPolicy& policy = result.Context->getPrintingPolicy();
    for (const VarDecl* var : tallies(*loop, *function->getBody(), *result.Context))
      names += (names.empty() ? "`" : ", `") + var->getNameAsString() + "` (" +
               var->getType().getUnqualifiedType().getAsString(policy) + ")";
    std::vector<const FieldDecl*> members = metrics::perRankMembersOf(*loop, *function, *result.Context);
    for (const FieldDecl* field : members)
      names += (names.empty() ? "`" : ", `") + field->getNameAsString() + "` (a member, " +
               field->getType().getUnqualifiedType().getAsString(policy) + ")";
    std::string more = members.empty() ? ""
                                       : " A member summed across calls (never reset before this loop) would "
                                         "count earlier calls' sums again if all-reduced after each loop: "
                                         "reset it before the loop (then fabricize all-reduces it), or reduce "
                                         "where it is read.";
    return "this loop sees one rank's shard of the data, and " + names +
           " collect its values and are read after it: on N ranks they cover 1/N of the data. All-reduce "
           "what they sum before reading them (keep the sums in plain numbers, which fabricize all-reduces "
           "after the loop, or pass them through fabric.all_reduce(x, fabric::ReduceOp::Sum))." +
           more;
  });
}

}  // namespace

Rule makePerRankMetricRule() {
  // A loop over a Fabric loader sees its shard whatever it does (an
  // evaluation that sums nothing is no data loop to DataLoops.h).
  auto loop = stmt(anyOf(cxxForRangeStmt(loaderLoop()), stmt(anyLoop(), dataloops::shardedDataLoop())),
                   feedsPerRankObjects(), hasAncestor(functionDecl(hasBody(compoundStmt())).bind("function")))
                  .bind("loop");
  return {"fabric-per-rank-metric", "+",
          "Report objects of the program's own (a running-mean meter, a vector of losses) that a loop "
          "over a Fabric loader (or any loop whose data the migration splits across ranks) feeds and that are "
          "read after it: each rank's covers its shard only. "
          "Plain sums are all-reduced by fabric-reduce-metric; these need a person.",
          RuleKind::Diagnostic, makeRule(loop, noopEdit(node("loop")), explainObjects())};
}

}  // namespace fabricize
