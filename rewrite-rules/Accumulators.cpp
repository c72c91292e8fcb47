#include "Accumulators.h"

#include "Statements.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/StmtCXX.h"

#include <algorithm>
#include <functional>
#include <set>

namespace fabricize::metrics {

using namespace clang;

namespace {

using statements::isLoop;
using statements::isTensorType;
const Stmt* bodyOf(const Stmt& loop) { return statements::loopBody(loop); }
// A lambda's body runs when it is called, not here.
void walk(const Stmt* s, const std::function<void(const Stmt&)>& visit) {
  statements::forEach(s, visit, /*intoLambdas=*/false);
}

}  // namespace

const VarDecl* localVariable(const Expr* e) {
  const auto* ref = dyn_cast_or_null<DeclRefExpr>(e ? e->IgnoreParenImpCasts() : nullptr);
  const auto* var = ref ? dyn_cast<VarDecl>(ref->getDecl()) : nullptr;
  return var && var->hasLocalStorage() && !isa<ParmVarDecl>(var) ? var : nullptr;
}

// `var` is declared in a block that runs `loop` once each time it runs (no
// loop in between): a value started afresh for each pass of the loop.
bool declaredForOnePass(const VarDecl& var, const Stmt& loop, ASTContext& context) {
  const Stmt* block = nullptr;
  for (const DynTypedNode& parent : context.getParents(var))
    if (const auto* declaration = parent.get<DeclStmt>())
      for (const DynTypedNode& grand : context.getParents(*declaration)) block = grand.get<CompoundStmt>();
  if (!block) return false;
  DynTypedNode current = DynTypedNode::create(loop);
  for (int depth = 0; depth < 64; ++depth) {
    DynTypedNodeList parents = context.getParents(current);
    if (parents.empty()) return false;
    const Stmt* parent = parents[0].get<Stmt>();
    if (parent == block) return true;
    if (!parent || isLoop(*parent)) return false;
    current = parents[0];
  }
  return false;
}

bool readAfter(const VarDecl& var, const Stmt& loop, const Stmt& functionBody, ASTContext& context) {
  const SourceManager& sm = context.getSourceManager();
  SourceLocation loopEnd = sm.getExpansionLoc(loop.getEndLoc());
  bool read = false;
  walk(&functionBody, [&](const Stmt& s) {
    if (read || !sm.isBeforeInTranslationUnit(loopEnd, sm.getExpansionLoc(s.getBeginLoc()))) return;
    if (const auto* ref = dyn_cast<DeclRefExpr>(&s); ref && ref->getDecl() == &var) read = true;
  });
  return read;
}

bool isReduction(const Stmt& s, const VarDecl& var) {
  const Expr *lhs = nullptr, *rhs = nullptr;
  if (const auto* op = dyn_cast<BinaryOperator>(&s); op && op->getOpcode() == BO_Assign) {
    lhs = op->getLHS();
    rhs = op->getRHS();
  } else if (const auto* call = dyn_cast<CXXOperatorCallExpr>(&s); call && call->getOperator() == OO_Equal) {
    lhs = call->getArg(0);
    rhs = call->getArg(1);
  }
  if (localVariable(lhs) != &var || !rhs) return false;
  bool reduces = false;
  walk(rhs, [&](const Stmt& inner) {
    if (const auto* call = dyn_cast<CXXMemberCallExpr>(&inner))
      if (const CXXMethodDecl* method = call->getMethodDecl())
        reduces = reduces || (method->getName() == "all_reduce" &&
                              method->getParent()->getQualifiedNameAsString() == "fabric::Fabric");
  });
  return reduces;
}

// The variables the loop's body accumulates into (`+=`, `-=`, `++`, `--`)
// and never assigns outright, of arithmetic or tensor type, declared before
// the loop in a block that runs the loop once (no loop in between), and read
// after it. In declaration order.
std::vector<const VarDecl*> accumulatorsOf(const Stmt& loop, const Stmt& functionBody, ASTContext& context) {
  const SourceManager& sm = context.getSourceManager();
  std::vector<const VarDecl*> accumulated;
  std::set<const VarDecl*> assigned;
  walk(bodyOf(loop), [&](const Stmt& s) {
    const VarDecl* target = nullptr;
    if (const auto* op = dyn_cast<CompoundAssignOperator>(&s)) {
      if (op->getOpcode() == BO_AddAssign || op->getOpcode() == BO_SubAssign)
        target = localVariable(op->getLHS());
      else if (const VarDecl* other = localVariable(op->getLHS()))
        assigned.insert(other);
    } else if (const auto* op = dyn_cast<UnaryOperator>(&s)) {
      if (op->isIncrementDecrementOp()) target = localVariable(op->getSubExpr());
    } else if (const auto* op = dyn_cast<CXXOperatorCallExpr>(&s)) {
      OverloadedOperatorKind kind = op->getOperator();
      if (kind == OO_PlusEqual || kind == OO_MinusEqual || kind == OO_PlusPlus || kind == OO_MinusMinus)
        target = localVariable(op->getArg(0));
      else if (kind == OO_Equal)
        if (const VarDecl* other = localVariable(op->getArg(0))) assigned.insert(other);
    } else if (const auto* op = dyn_cast<BinaryOperator>(&s); op && op->getOpcode() == BO_Assign) {
      if (const VarDecl* other = localVariable(op->getLHS())) assigned.insert(other);
    }
    if (target && std::find(accumulated.begin(), accumulated.end(), target) == accumulated.end())
      accumulated.push_back(target);
  });
  SourceLocation loopBegin = sm.getExpansionLoc(loop.getBeginLoc());
  SourceLocation loopEnd = sm.getExpansionLoc(loop.getEndLoc());
  std::vector<const VarDecl*> result;
  for (const VarDecl* var : accumulated) {
    QualType type = var->getType();
    if (assigned.count(var) || !(type->isArithmeticType() || isTensorType(type))) continue;
    if (!sm.isBeforeInTranslationUnit(sm.getExpansionLoc(var->getLocation()), loopBegin)) continue;
    if (!declaredForOnePass(*var, loop, context)) continue;
    // Read after the loop, and not reduced there already.
    bool reduced = false;
    walk(&functionBody, [&](const Stmt& s) {
      if (sm.isBeforeInTranslationUnit(loopEnd, sm.getExpansionLoc(s.getBeginLoc())) && isReduction(s, *var))
        reduced = true;
    });
    if (readAfter(*var, loop, functionBody, context) && !reduced) result.push_back(var);
  }
  return result;
}

}  // namespace fabricize::metrics
