#include "rule-helpers/Accumulators.h"

#include "rule-helpers/Matchers.h"
#include "rule-helpers/Statements.h"

#include "clang/AST/DeclTemplate.h"
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
        reduces = reduces || (match::plainName(method) == "all_reduce" &&
                              method->getParent()->getQualifiedNameAsString() == "fabric::Fabric");
  });
  return reduces;
}

namespace {

// What the loop's body accumulates into (`+=`, `-=`, `++`, `--`) and never
// assigns outright, as `named` picks it out of an expression (a local, a
// member), in order of first use.
template <class Decl, class Named>
std::vector<const Decl*> accumulatedIn(const Stmt& loop, Named named) {
  std::vector<const Decl*> accumulated;
  std::set<const Decl*> assigned;
  walk(bodyOf(loop), [&](const Stmt& s) {
    const Decl* target = nullptr;
    if (const auto* op = dyn_cast<CompoundAssignOperator>(&s)) {
      if (op->getOpcode() == BO_AddAssign || op->getOpcode() == BO_SubAssign)
        target = named(op->getLHS());
      else if (const Decl* other = named(op->getLHS()))
        assigned.insert(other);
    } else if (const auto* op = dyn_cast<UnaryOperator>(&s)) {
      if (op->isIncrementDecrementOp()) target = named(op->getSubExpr());
    } else if (const auto* op = dyn_cast<CXXOperatorCallExpr>(&s)) {
      OverloadedOperatorKind kind = op->getOperator();
      if (kind == OO_PlusEqual || kind == OO_MinusEqual || kind == OO_PlusPlus || kind == OO_MinusMinus)
        target = named(op->getArg(0));
      else if (kind == OO_Equal)
        if (const Decl* other = named(op->getArg(0))) assigned.insert(other);
    } else if (const auto* op = dyn_cast<BinaryOperator>(&s); op && op->getOpcode() == BO_Assign) {
      if (const Decl* other = named(op->getLHS())) assigned.insert(other);
    }
    if (target && std::find(accumulated.begin(), accumulated.end(), target) == accumulated.end())
      accumulated.push_back(target);
  });
  llvm::erase_if(accumulated, [&](const Decl* decl) {
    QualType type = decl->getType();
    return assigned.count(decl) || !(type->isArithmeticType() || isTensorType(type));
  });
  return accumulated;
}

// `s` assigns `value = ...` outright: the left-hand side, else null.
const Expr* assignedBy(const Stmt& s) {
  const Stmt* statement = &s;
  if (const auto* cleanups = dyn_cast<ExprWithCleanups>(statement)) statement = cleanups->getSubExpr();
  if (const auto* op = dyn_cast<BinaryOperator>(statement); op && op->getOpcode() == BO_Assign) return op->getLHS();
  if (const auto* call = dyn_cast<CXXOperatorCallExpr>(statement); call && call->getOperator() == OO_Equal)
    return call->getArg(0);
  return nullptr;
}

// `field = <fabric>.all_reduce(...)` after `loop` in `function`.
bool memberReducedAfter(const FieldDecl& field, const Stmt& loop, const FunctionDecl& function,
                        const SourceManager& sm) {
  bool reduced = false;
  walk(function.getBody(), [&](const Stmt& s) {
    const Expr* target = assignedBy(s);
    if (reduced || !target || thisMember(target) != &field ||
        !sm.isBeforeInTranslationUnit(sm.getExpansionLoc(loop.getEndLoc()), sm.getExpansionLoc(s.getBeginLoc())))
      return;
    walk(&s, [&](const Stmt& inner) {
      if (const auto* call = dyn_cast<CXXMemberCallExpr>(&inner))
        if (const CXXMethodDecl* method = call->getMethodDecl())
          reduced = reduced || (match::plainName(method) == "all_reduce" &&
                                method->getParent()->getQualifiedNameAsString() == "fabric::Fabric");
    });
  });
  return reduced;
}

// `field = ...;` as a statement of a block around `loop` with no loop in
// between, before it: each pass of the loop starts from it.
bool resetBefore(const FieldDecl& field, const Stmt& loop, ASTContext& context) {
  DynTypedNode current = DynTypedNode::create(loop);
  for (int depth = 0; depth < 64; ++depth) {
    DynTypedNodeList parents = context.getParents(current);
    if (parents.empty()) return false;
    const Stmt* parent = parents[0].get<Stmt>();
    if (!parent || isLoop(*parent) || isa<LambdaExpr>(parent)) return false;
    if (const auto* block = dyn_cast<CompoundStmt>(parent))
      for (const Stmt* child : block->body()) {
        if (child == current.get<Stmt>()) break;
        if (const Expr* target = assignedBy(*child); target && thisMember(target) == &field) return true;
      }
    current = parents[0];
  }
  return false;
}

// `field.backward()` (or a backward call given it) after `loop`: a loss
// summed over batches and back-propagated once, not a metric.
bool backwardAfter(const FieldDecl& field, const Stmt& loop, const FunctionDecl& function, const SourceManager& sm) {
  bool found = false;
  walk(function.getBody(), [&](const Stmt& s) {
    const auto* call = dyn_cast<CallExpr>(&s);
    const FunctionDecl* callee = call ? call->getDirectCallee() : nullptr;
    if (found || !callee || match::plainName(callee) != "backward" ||
        !sm.isBeforeInTranslationUnit(sm.getExpansionLoc(loop.getEndLoc()), sm.getExpansionLoc(s.getBeginLoc())))
      return;
    if (const auto* member = dyn_cast<CXXMemberCallExpr>(call))
      found = thisMember(member->getImplicitObjectArgument()) == &field;
    for (const Expr* argument : call->arguments()) found = found || thisMember(argument) == &field;
  });
  return found;
}

std::vector<const FieldDecl*> memberAccumulations(const Stmt& loop, const FunctionDecl& function, ASTContext& context,
                                                  bool reset) {
  std::vector<const FieldDecl*> result;
  const SourceManager& sm = context.getSourceManager();
  for (const FieldDecl* field : accumulatedIn<FieldDecl>(loop, thisMember))
    if (resetBefore(*field, loop, context) == reset && memberReadOutside(*field, loop, function, context) &&
        !memberReducedAfter(*field, loop, function, sm) && !backwardAfter(*field, loop, function, sm))
      result.push_back(field);
  return result;
}

}  // namespace

const FieldDecl* thisMember(const Expr* e) {
  const auto* member = dyn_cast_or_null<MemberExpr>(e ? e->IgnoreParenImpCasts() : nullptr);
  if (!member || !isa<CXXThisExpr>(member->getBase()->IgnoreParenImpCasts())) return nullptr;
  return dyn_cast<FieldDecl>(member->getMemberDecl());
}

bool memberReadOutside(const FieldDecl& field, const Stmt& loop, const FunctionDecl& function, ASTContext& context) {
  const SourceManager& sm = context.getSourceManager();
  SourceLocation loopEnd = sm.getExpansionLoc(loop.getEndLoc());
  const auto* record = dyn_cast<CXXRecordDecl>(field.getParent());
  if (!record) return false;
  // Its member functions, member templates (`template <class Loader> void
  // fit(...)`) included.
  std::vector<const CXXMethodDecl*> methods(record->method_begin(), record->method_end());
  for (const Decl* decl : record->decls())
    if (const auto* functionTemplate = dyn_cast<FunctionTemplateDecl>(decl))
      if (const auto* method = dyn_cast<CXXMethodDecl>(functionTemplate->getTemplatedDecl())) methods.push_back(method);
  for (const CXXMethodDecl* method : methods) {
    if (method->isImplicit() || method->isDefaulted() || method->isDeleted() || method->isPureVirtual()) continue;
    const FunctionDecl* definition = nullptr;
    if (!method->hasBody(definition)) return true;  // defined elsewhere: it may read it
    // The loop may be in an instantiation of this member template.
    auto written = [](const FunctionDecl& f) {
      const FunctionDecl* pattern = f.getTemplateInstantiationPattern();
      return (pattern ? pattern : &f)->getCanonicalDecl();
    };
    bool sameFunction = written(*definition) == written(function);
    std::set<const Expr*> assignedTo;
    bool read = false;
    statements::forEach(
        definition->getBody(),
        [&](const Stmt& s) {
          if (const Expr* target = assignedBy(s)) assignedTo.insert(target->IgnoreParenImpCasts());
          const auto* member = dyn_cast<MemberExpr>(&s);
          if (read || !member || member->getMemberDecl() != &field || assignedTo.count(member)) return;
          // In the loop's own function: only after the loop.
          if (sameFunction && !sm.isBeforeInTranslationUnit(loopEnd, sm.getExpansionLoc(member->getBeginLoc()))) return;
          read = true;
        },
        /*intoLambdas=*/true);
    if (read) return true;
  }
  return false;
}

std::vector<const FieldDecl*> memberSumsOf(const Stmt& loop, const FunctionDecl& function, ASTContext& context) {
  return memberAccumulations(loop, function, context, /*reset=*/true);
}

std::vector<const FieldDecl*> membersAccumulatedIn(const Stmt& loop) {
  return accumulatedIn<FieldDecl>(loop, thisMember);
}

std::vector<const FieldDecl*> memberRunningTotalsOf(const Stmt& loop, const FunctionDecl& function,
                                                    ASTContext& context) {
  return memberAccumulations(loop, function, context, /*reset=*/false);
}

// The variables the loop's body accumulates into (`+=`, `-=`, `++`, `--`)
// and never assigns outright, of arithmetic or tensor type, declared before
// the loop in a block that runs the loop once (no loop in between), and read
// after it. In declaration order.
std::vector<const VarDecl*> accumulatorsOf(const Stmt& loop, const Stmt& functionBody, ASTContext& context) {
  const SourceManager& sm = context.getSourceManager();
  std::vector<const VarDecl*> accumulated = accumulatedIn<VarDecl>(loop, localVariable);
  SourceLocation loopBegin = sm.getExpansionLoc(loop.getBeginLoc());
  SourceLocation loopEnd = sm.getExpansionLoc(loop.getEndLoc());
  std::vector<const VarDecl*> result;
  for (const VarDecl* var : accumulated) {
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
