#include "rule-helpers/Metrics.h"

#include "rule-helpers/Accumulators.h"
#include "rule-helpers/Statements.h"
#include "rule-helpers/DataLoops.h"
#include "rule-helpers/Matchers.h"
#include "rule-helpers/RankValues.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/StmtCXX.h"

#include <functional>
#include <set>

namespace fabricize::metrics {

using namespace clang;

namespace {

using statements::isLoop;
bool isTensor(QualType type) { return statements::isTensorType(type); }
const Stmt* bodyOf(const Stmt& loop) { return statements::loopBody(loop); }
// A lambda's body runs when it is called, not here.
void walk(const Stmt* s, const std::function<void(const Stmt&)>& visit) {
  statements::forEach(s, visit, /*intoLambdas=*/false);
}

// A class whose objects hold a per-rank tally worth reporting: not a tensor,
// a stream, a string, or something the Fabric handles (modules, optimizers,
// loaders, devices).
bool isTallyClass(QualType type) {
  const auto* record = type.getNonReferenceType()->getAsCXXRecordDecl();
  if (!record || isTensor(type)) return false;
  for (const char* name : {"std::basic_ostream", "std::basic_ios", "std::basic_string", "torch::nn::Module",
                           "torch::nn::ModuleHolder", "torch::optim::Optimizer", "torch::data::DataLoaderBase",
                           "c10::Device", "fabric::Fabric", "fabric::DataLoader", "std::unique_ptr", "std::shared_ptr"})
    if (match::derivesFrom(*record, name)) return false;
  return !match::isOptimizerHandle(type) && !match::isModuleType(type);
}

}  // namespace

std::vector<const VarDecl*> perRankObjectsOf(const Stmt& loop, const Stmt& functionBody, ASTContext& context) {
  const SourceManager& sm = context.getSourceManager();
  SourceLocation loopBegin = sm.getExpansionLoc(loop.getBeginLoc());
  std::vector<const VarDecl*> objects;
  walk(bodyOf(loop), [&](const Stmt& s) {
    const auto* call = dyn_cast<CXXMemberCallExpr>(&s);
    if (!call || !call->getMethodDecl() || call->getMethodDecl()->isConst()) return;
    const VarDecl* var = localVariable(call->getImplicitObjectArgument());
    if (!var || !isTallyClass(var->getType()) || std::find(objects.begin(), objects.end(), var) != objects.end())
      return;
    if (!sm.isBeforeInTranslationUnit(sm.getExpansionLoc(var->getLocation()), loopBegin)) return;
    if (declaredForOnePass(*var, loop, context) && readAfter(*var, loop, functionBody, context)) objects.push_back(var);
  });
  return objects;
}

std::vector<const FieldDecl*> perRankMembersOf(const Stmt& loop, const FunctionDecl& function, ASTContext& context) {
  std::vector<const FieldDecl*> members;
  auto add = [&](const FieldDecl* field) {
    if (field && !llvm::is_contained(members, field) && memberReadOutside(*field, loop, function, context))
      members.push_back(field);
  };
  std::vector<const FieldDecl*> runningTotals = memberRunningTotalsOf(loop, function, context);
  walk(bodyOf(loop), [&](const Stmt& s) {
    if (const auto* call = dyn_cast<CXXMemberCallExpr>(&s)) {
      const FieldDecl* field = thisMember(call->getImplicitObjectArgument());
      if (!field || !call->getMethodDecl() || call->getMethodDecl()->isConst() || !isTallyClass(field->getType()))
        return;
      for (const Expr* argument : call->arguments())
        if (isPerRankValue(*argument, context)) return add(field);
      return;
    }
    // `total_ += loss.item<double>()` into a running total.
    auto [target, value] = statements::assignmentSides(s);
    const FieldDecl* field = thisMember(target);
    if (field && value && llvm::is_contained(runningTotals, field) && isPerRankValue(*value, context)) add(field);
  });
  return members;
}

bool isReducedSum(const VarDecl& var, ASTContext& context) {
  const FunctionDecl* function = match::enclosingFunction(DynTypedNode::create(var), context);
  if (!function || !function->getBody()) return false;
  bool reduced = false;
  walk(function->getBody(), [&](const Stmt& s) {
    if (reduced) return;
    if (isReduction(s, var)) reduced = true;
    // A sum over a loop whose data the migration splits across ranks
    // (a Fabric loader, a sharded index loop...): fabric-reduce-metric
    // reduces it.
    if (!isLoop(s) || !dataloops::isShardedPlan(dataloops::planFor(s, context))) return;
    for (const VarDecl* sum : accumulatorsOf(s, *function->getBody(), context)) reduced = reduced || sum == &var;
  });
  return reduced;
}

bool isPerRankValue(const Expr& e, ASTContext& context) {
  return rankvalues::isPerRankValue(e, context, [&](const VarDecl& var) { return isReducedSum(var, context); });
}

}  // namespace fabricize::metrics
