// Gradient accumulation: a loop that steps the optimizer every k backward
// passes all-reduces the gradients only on the pass that steps; on the
// k - 1 others each rank keeps its gradients local (Lightning's
// fabric.no_backward_sync). Before the backward's statement:
//   auto no_sync = fabric.no_backward_sync(model, <this pass does not step>);
// written from the loop's own condition, for the shapes programs use:
//   if (++batches % k == 0) step      ->  (batches + 1) % k != 0
//   if ((i + 1) % k == 0 || last)     ->  !((i + 1) % k == 0 || last)
//   if (sync) step (a flag)           ->  !(sync)
//   for (m = 0; m < M; ++m) backward; step   ->  m + 1 < M
// A condition it cannot restate without side effects is reported.
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "rule-helpers/Optimizers.h"
#include "RuleFactories.h"

#include "clang/Lex/Lexer.h"
#include "clang/Tooling/Transformer/SourceCode.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;
using MatchResult = ast_matchers::MatchFinder::MatchResult;

namespace {

// What fabric-no-backward-sync writes before one backward pass.
struct Accumulation {
  const Stmt* before = nullptr;  // the backward's statement in its block
  std::string model;             // the module, as fabric.no_backward_sync takes it
  std::string accumulating;      // true on the passes that do not step
  std::string problem;           // why it cannot be written; empty when it can
};

auto optimizerStep() {
  return cxxMemberCallExpr(anyOf(
      callee(cxxMethodDecl(hasName("step"), ofClass(cxxRecordDecl(isSameOrDerivedFrom("::torch::optim::Optimizer"))))),
      callee(cxxMethodDecl(hasName("step"), ofClass(fabricClass())))));
}

const Stmt* parentStmt(const Stmt& node, ASTContext& context) {
  DynTypedNodeList parents = context.getParents(node);
  return parents.empty() ? nullptr : parents[0].get<Stmt>();
}

bool isLoop(const Stmt& s) { return isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt>(s); }

bool contains(const Stmt& outer, const Stmt& inner, const SourceManager& sm) {
  SourceRange o = outer.getSourceRange(), i = inner.getSourceRange();
  return !sm.isBeforeInTranslationUnit(i.getBegin(), o.getBegin()) &&
         !sm.isBeforeInTranslationUnit(o.getEnd(), i.getEnd());
}

std::string text(const Stmt& s, ASTContext& context) {
  return tooling::getText(CharSourceRange::getTokenRange(s.getSourceRange()), context).str();
}

// A counter named by a plain reference (a local, a parameter, a member).
const ValueDecl* counterOf(const Expr* e) {
  e = e->IgnoreParenImpCasts();
  if (const auto* ref = dyn_cast<DeclRefExpr>(e)) return ref->getDecl();
  if (const auto* member = dyn_cast<MemberExpr>(e)) return member->getMemberDecl();
  return nullptr;
}

// `condition` restated as it reads before the backward at `before`: with
// `++v` read as `(v + 1)`, `v++` as `v`, and each counter that statements
// between the backward and the condition advance by one (`++v;`) read one
// ahead. Empty, with `problem` set, when it cannot be.
std::string restate(const Expr& condition, SourceLocation backwardAt, const std::vector<const Stmt*>& between,
                    ASTContext& context, std::string& problem) {
  const SourceManager& sm = context.getSourceManager();
  std::map<const ValueDecl*, int> advanced;
  for (const Stmt* statement : between) {
    const Stmt* s = statement;
    if (const auto* cleanups = dyn_cast<ExprWithCleanups>(s)) s = cleanups->getSubExpr();
    const auto* inc = dyn_cast<UnaryOperator>(s);
    if (inc && inc->isIncrementOp()) {
      if (const ValueDecl* v = counterOf(inc->getSubExpr())) ++advanced[v];
    }
    // `v += 1;`
    const auto* add = dyn_cast<CompoundAssignOperator>(s);
    const auto* one = add ? dyn_cast<IntegerLiteral>(add->getRHS()->IgnoreParenImpCasts()) : nullptr;
    if (add && add->getOpcode() == BO_AddAssign && one && one->getValue() == 1)
      if (const ValueDecl* v = counterOf(add->getLHS())) ++advanced[v];
  }
  // Edits on the condition's own text, as offsets into it.
  struct Piece {
    unsigned begin, end;
    std::string replacement;
  };
  std::vector<Piece> pieces;
  CharSourceRange whole = CharSourceRange::getTokenRange(condition.getSourceRange());
  unsigned start = sm.getFileOffset(sm.getExpansionLoc(whole.getBegin()));
  auto offsets = [&](const Stmt& s) {
    CharSourceRange r =
        Lexer::makeFileCharRange(CharSourceRange::getTokenRange(s.getSourceRange()), sm, context.getLangOpts());
    return std::make_pair(sm.getFileOffset(r.getBegin()) - start, sm.getFileOffset(r.getEnd()) - start);
  };
  std::function<bool(const Stmt&)> walk = [&](const Stmt& s) -> bool {
    if (const auto* unary = dyn_cast<UnaryOperator>(&s)) {
      if (unary->isIncrementDecrementOp()) {
        const ValueDecl* v = counterOf(unary->getSubExpr());
        if (!v) return false;
        std::string name = text(*unary->getSubExpr(), context);
        std::string sign = unary->isIncrementOp() ? " + " : " - ";
        auto [b, e] = offsets(*unary);
        pieces.push_back({b, e, unary->isPrefix() ? "(" + name + sign + "1)" : name});
        return true;
      }
    }
    if (const auto* binary = dyn_cast<BinaryOperator>(&s))
      if (binary->isAssignmentOp() || binary->isCompoundAssignmentOp()) return false;
    if (isa<CallExpr, CXXConstructExpr, LambdaExpr, StmtExpr>(s)) return false;
    if (const ValueDecl* v = isa<DeclRefExpr, MemberExpr>(s) ? counterOf(cast<Expr>(&s)) : nullptr) {
      if (const auto* var = dyn_cast<VarDecl>(v))
        if (var->isLocalVarDecl() && !sm.isBeforeInTranslationUnit(var->getLocation(), backwardAt)) {
          problem = "`" + var->getName().str() + "` is declared after the backward pass";
          return false;
        }
      auto shift = advanced.find(v);
      if (shift != advanced.end()) {
        auto [b, e] = offsets(s);
        pieces.push_back({b, e, "(" + text(s, context) + " + " + std::to_string(shift->second) + ")"});
        return true;
      }
      if (isa<DeclRefExpr>(s)) return true;
    }
    for (const Stmt* child : s.children())
      if (child && !walk(*child)) return false;
    return true;
  };
  if (!walk(condition)) {
    if (problem.empty())
      problem = "fabricize cannot restate its condition `" + text(condition, context) + "` before the backward pass";
    return "";
  }
  std::string restated = text(condition, context);
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.begin > b.begin; });
  for (const Piece& piece : pieces) {
    if (piece.end > restated.size() || piece.begin > piece.end) {
      problem = "its condition is spelled through a macro";
      return "";
    }
    restated.replace(piece.begin, piece.end - piece.begin, piece.replacement);
  }
  return restated;
}

// Whether `condition` counts passes: a `%` in it, or in the initialiser of
// a flag it reads (`const bool sync = i % k == 0;`).
bool countsPasses(const Expr& condition, ASTContext& context) {
  auto modulo = binaryOperator(hasOperatorName("%"));
  if (!ast_matchers::match(expr(anyOf(modulo, hasDescendant(modulo))), condition, context).empty()) return true;
  const auto* flag = dyn_cast<DeclRefExpr>(condition.IgnoreParenImpCasts());
  const auto* var = flag ? dyn_cast<VarDecl>(flag->getDecl()) : nullptr;
  return var && var->getInit() &&
         !ast_matchers::match(expr(anyOf(modulo, hasDescendant(modulo))), *var->getInit(), context).empty();
}

// `!(<c>)`, or `a != b` for a condition `a == b`.
std::string negated(const Expr& condition, const std::string& restated) {
  const auto* binary = dyn_cast<BinaryOperator>(condition.IgnoreParenImpCasts());
  if (binary && binary->getOpcode() == BO_EQ && condition.IgnoreImpCasts() == binary) {
    size_t at = restated.rfind("==");
    if (at != std::string::npos && restated.find("==") == at)
      return restated.substr(0, at) + "!=" + restated.substr(at + 2);
  }
  return "!(" + restated + ")";
}

// The micro-batch loop `for (int m = 0; m < M; ++m)`: "m + 1 < M".
std::string lastPassOf(const Stmt& loop, ASTContext& context, std::string& problem) {
  const auto* f = dyn_cast<ForStmt>(&loop);
  const auto* cond = f && f->getCond() ? dyn_cast<BinaryOperator>(f->getCond()->IgnoreParenImpCasts()) : nullptr;
  const ValueDecl* counter = cond ? counterOf(cond->getLHS()) : nullptr;
  const auto* inc = f && f->getInc() ? dyn_cast<UnaryOperator>(f->getInc()->IgnoreParenImpCasts()) : nullptr;
  if (!counter || !inc || !inc->isIncrementOp() || counterOf(inc->getSubExpr()) != counter ||
      !(cond->getOpcode() == BO_LT || cond->getOpcode() == BO_NE || cond->getOpcode() == BO_LE)) {
    problem = "the loop over its micro-batches is not `for (m = ...; m < M; ++m)`";
    return "";
  }
  std::string op = cond->getOpcode() == BO_LE ? " <= " : " < ";
  return text(*cond->getLHS(), context) + " + 1" + op + text(*cond->getRHS(), context);
}

// The module `step`'s optimizer trains, as no_backward_sync takes it; or
// the one module the loop runs forward.
std::string modelFor(const CXXMemberCallExpr& step, const Stmt& loop, const FunctionDecl& function,
                     ASTContext& context) {
  const Expr* object = step.getImplicitObjectArgument();
  if (object && step.getMethodDecl() && step.getMethodDecl()->getParent()->getName() == "Fabric" && step.getNumArgs())
    object = step.getArg(0);
  const ValueDecl* handle = object ? counterOf(object) : nullptr;
  if (!handle && object)
    if (const auto* unary = dyn_cast<UnaryOperator>(object->IgnoreParenImpCasts()))
      handle = counterOf(unary->getSubExpr());
  if (!handle && object)
    if (const auto* call = dyn_cast<CXXOperatorCallExpr>(object->IgnoreParenImpCasts()))
      if (call->getNumArgs()) handle = counterOf(call->getArg(0));
  auto spelled = [&](const optimizers::Model& model) {
    std::string name = text(*model.reference, context);
    QualType type = model.decl->getType().getNonReferenceType();
    return (isUniquePointerToModule(type) || type->isPointerType() ? "*" : "") + name;
  };
  for (const optimizers::Creation& creation : optimizers::creationsIn(function, context))
    if (creation.handle == handle && creation.models.size() == 1) return spelled(creation.models.front());
  // The optimizer comes from elsewhere: the one module the loop runs.
  std::vector<optimizers::Model> run;
  for (const auto& nodes : ast_matchers::match(
           stmt(forEachDescendant(cxxMemberCallExpr(callee(cxxMethodDecl(hasName("forward"), ofClass(moduleClass()))),
                                                    on(moduleReference("module"))))),
           loop, context)) {
    optimizers::Model model{nodes.getNodeAs<ValueDecl>("module"), nodes.getNodeAs<Expr>("moduleRef")};
    bool known = false;
    for (const auto& m : run) known = known || optimizers::sameModel(m, model);
    if (!known) run.push_back(model);
  }
  return run.size() == 1 ? spelled(run.front()) : "";
}

std::optional<Accumulation> accumulationAt(const Expr& backward, ASTContext& context) {
  const SourceManager& sm = context.getSourceManager();
  const FunctionDecl* function = enclosingFunction(DynTypedNode::create(backward), context);
  if (!function || !function->hasBody()) return std::nullopt;
  // The backward's statement, and the loop around it.
  const Stmt* statement = &backward;
  const CompoundStmt* block = nullptr;
  for (const Stmt* p = parentStmt(*statement, context); p; statement = p, p = parentStmt(*p, context))
    if ((block = dyn_cast<CompoundStmt>(p))) break;
  if (!block) return std::nullopt;
  const Stmt* loop = nullptr;
  for (const Stmt* p = parentStmt(backward, context); p && !isa<LambdaExpr>(p); p = parentStmt(*p, context))
    if (isLoop(*p)) {
      loop = p;
      break;
    }
  if (!loop) return std::nullopt;
  // Already migrated: a no_backward_sync scope open in the block.
  for (const Stmt* s : block->body()) {
    if (s == statement) break;
    if (!ast_matchers::match(stmt(hasDescendant(cxxMemberCallExpr(
                                 callee(cxxMethodDecl(hasName("no_backward_sync"), ofClass(fabricClass())))))),
                             *s, context)
             .empty())
      return std::nullopt;
  }

  Accumulation result;
  result.before = statement;
  for (const auto& nodes :
       ast_matchers::match(stmt(forEachDescendant(optimizerStep().bind("step"))), *function->getBody(), context)) {
    const auto* step = nodes.getNodeAs<CXXMemberCallExpr>("step");
    if (contains(*loop, *step, sm)) {
      // In the backward's loop: an accumulation if an `if` inside the loop
      // that does not hold the backward decides it.
      const IfStmt* decides = nullptr;
      for (const Stmt* p = parentStmt(*step, context); p && p != loop; p = parentStmt(*p, context))
        if (const auto* i = dyn_cast<IfStmt>(p))
          if (!contains(*i, backward, sm) && contains(*i->getThen(), *step, sm)) decides = i;
      if (!decides) return std::nullopt;  // it steps after every backward
      // Accumulation counts passes: a step decided without a modulo (a loss
      // that is not NaN, a flag set from one) is something else.
      if (!countsPasses(*decides->getCond(), context)) return std::nullopt;
      if (!sm.isBeforeInTranslationUnit(backward.getBeginLoc(), decides->getBeginLoc())) return std::nullopt;
      std::vector<const Stmt*> between;
      bool after = false;
      for (const Stmt* s : block->body()) {
        if (contains(*s, *decides, sm)) break;
        if (after) between.push_back(s);
        after = after || s == statement;
      }
      std::string restated = restate(*decides->getCond(), statement->getBeginLoc(), between, context, result.problem);
      if (!restated.empty()) result.accumulating = negated(*decides->getCond(), restated);
    } else {
      // After the micro-batch loop, in the loop around it.
      const Stmt* outer = nullptr;
      for (const Stmt* p = parentStmt(*loop, context); p && !isa<LambdaExpr>(p); p = parentStmt(*p, context))
        if (isLoop(*p)) {
          outer = p;
          break;
        }
      if (!outer || !contains(*outer, *step, sm) ||
          !sm.isBeforeInTranslationUnit(loop->getEndLoc(), step->getBeginLoc()))
        continue;
      result.accumulating = lastPassOf(*loop, context, result.problem);
    }
    if (result.problem.empty()) {
      result.model = modelFor(*step, *loop, *function, context);
      if (result.model.empty()) result.problem = "the model its optimizer trains is not named here";
    }
    return result;
  }
  return std::nullopt;
}

AST_MATCHER(Expr, accumulatesWritably) {
  auto a = accumulationAt(Node, Finder->getASTContext());
  return a && a->problem.empty();
}
AST_MATCHER(Expr, accumulatesUnwritably) {
  auto a = accumulationAt(Node, Finder->getASTContext());
  return a && !a->problem.empty();
}

EditGenerator openNoSyncBeforeStatement() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* backward = result.Nodes.getNodeAs<Expr>("backward");
    auto accumulation = accumulationAt(*backward, *result.Context);
    if (!accumulation || !accumulation->problem.empty()) return llvm::SmallVector<Edit, 1>();
    std::string statement = "auto no_sync = " + edits::fabricNameAt(result) + ".no_backward_sync(" +
                            accumulation->model + ", " + accumulation->accumulating + ");";
    return llvm::SmallVector<Edit, 1>{edits::statementBefore(*accumulation->before, statement, *result.SourceManager)};
  };
}

Stencil problemOf() {
  return run([](const MatchResult& result) -> llvm::Expected<std::string> {
    auto accumulation = accumulationAt(*result.Nodes.getNodeAs<Expr>("backward"), *result.Context);
    return "gradient accumulation: every micro-batch's backward all-reduces (" +
           (accumulation ? accumulation->problem : std::string()) +
           "); open `auto no_sync = fabric.no_backward_sync(model, <this pass does not step>);` before it";
  });
}

}  // namespace

Rule makeNoBackwardSyncRule() {
  auto backward = expr(backwardCall(), inFabricScope());
  return {
      "fabric-no-backward-sync", "+",
      "Gradient accumulation (a step every k backward passes: a counter modulo k, a loop over "
      "micro-batches, a flag): `auto no_sync = fabric.no_backward_sync(model, <this pass does not step>);` "
      "before the backward, so only the pass that steps all-reduces; a condition it cannot restate is "
      "reported.",
      RuleKind::Rewrite,
      applyFirst<std::string>({
          makeRule(expr(backward, accumulatesWritably()).bind("backward"), openNoSyncBeforeStatement(),
                   cat("accumulate the gradients locally on the passes that do not step")),
          makeRule(expr(backward, accumulatesUnwritably()).bind("backward"), noopEdit(node("backward")), problemOf()),
      })};
}

}  // namespace fabricize
