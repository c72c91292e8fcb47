#include "Metrics.h"

#include "Accumulators.h"
#include "DataLoops.h"
#include "Matchers.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/StmtCXX.h"

#include <functional>
#include <set>

namespace fabricize::metrics {

using namespace clang;

namespace {

bool isTensor(QualType type) {
  const auto* record = type.getNonReferenceType()->getAsCXXRecordDecl();
  return record && (match::derivesFrom(*record, "at::Tensor") || match::derivesFrom(*record, "at::TensorBase"));
}

bool isLoop(const Stmt& s) { return isa<ForStmt>(s) || isa<WhileStmt>(s) || isa<DoStmt>(s) || isa<CXXForRangeStmt>(s); }

const Stmt* bodyOf(const Stmt& loop) {
  if (const auto* s = dyn_cast<ForStmt>(&loop)) return s->getBody();
  if (const auto* s = dyn_cast<WhileStmt>(&loop)) return s->getBody();
  if (const auto* s = dyn_cast<DoStmt>(&loop)) return s->getBody();
  if (const auto* s = dyn_cast<CXXForRangeStmt>(&loop)) return s->getBody();
  return nullptr;
}

void walk(const Stmt* s, const std::function<void(const Stmt&)>& visit) {
  if (!s || isa<LambdaExpr>(s)) return;  // a lambda's body runs when it is called, not here
  visit(*s);
  for (const Stmt* child : s->children()) walk(child, visit);
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

namespace {

bool isShapeQuery(const CXXMemberCallExpr& call) {
  const CXXMethodDecl* method = call.getMethodDecl();
  if (!method || !isTensor(call.getImplicitObjectArgument()->getType())) return false;
  llvm::StringRef name = method->getName();
  return name == "size" || name == "sizes" || name == "numel" || name == "dim" || name == "ndimension" ||
         name == "sym_size" || name == "sym_sizes" || name == "dtype" || name == "scalar_type" || name == "device";
}

bool isModuleForward(const Expr& e) {
  if (const auto* call = dyn_cast<CXXMemberCallExpr>(&e)) {
    const CXXMethodDecl* method = call->getMethodDecl();
    return method && method->getName() == "forward" && match::derivesFrom(*method->getParent(), "torch::nn::Module");
  }
  if (const auto* call = dyn_cast<CXXOperatorCallExpr>(&e); call && call->getOperator() == OO_Call) {
    const auto* record = call->getArg(0)->getType().getNonReferenceType()->getAsCXXRecordDecl();
    return record &&
           (match::derivesFrom(*record, "torch::nn::Module") || match::isModuleType(call->getArg(0)->getType()));
  }
  return false;
}

// `*it` on an iterator of a data loader (torch's, or the Fabric's): a batch.
bool isLoaderIteratorDereference(const Expr& e) {
  const auto* call = dyn_cast<CXXOperatorCallExpr>(&e);
  if (!call || (call->getOperator() != OO_Star && call->getOperator() != OO_Arrow)) return false;
  const auto* record = call->getArg(0)->getType().getNonReferenceType()->getAsCXXRecordDecl();
  if (!record) return false;
  std::string name = record->getQualifiedNameAsString();
  return name == "torch::data::Iterator" || name == "fabric::DataLoader::Iterator";
}

// The variable of `for (auto& batch : *loader)`.
bool isLoaderLoopVariable(const VarDecl& var, ASTContext& context) {
  for (const DynTypedNode& parent : context.getParents(var))
    if (const auto* declaration = parent.get<DeclStmt>())
      for (const DynTypedNode& grand : context.getParents(*declaration))
        if (const auto* loop = grand.get<CXXForRangeStmt>(); loop && loop->getLoopVarStmt() == declaration) {
          const auto* record =
              loop->getRangeInit()->IgnoreParenImpCasts()->getType().getNonReferenceType()->getAsCXXRecordDecl();
          return record && (match::derivesFrom(*record, "torch::data::DataLoaderBase") ||
                            match::derivesFrom(*record, "fabric::DataLoader"));
        }
  return false;
}

// What differs between ranks: a value computed from this rank's batches or
// from the model's outputs (a loss, a prediction, their item()). Not a
// tensor read from a file or made by the program, nor a shape: the sampler
// gives every rank batches of the same sizes, so `x.size(0)` and
// `ids.size(1) - seq_len` are the same everywhere.
bool isRankData(const Expr* e, ASTContext& context, std::set<const VarDecl*>& visiting);

bool holdsRankData(const VarDecl& var, ASTContext& context, std::set<const VarDecl*>& visiting) {
  if (!visiting.insert(&var).second) return false;
  if (isLoaderLoopVariable(var, context)) return true;
  if (isReducedSum(var, context)) return false;  // made the same on every rank
  // A tensor handed in: its origin is the caller's; a batch, most likely.
  if (isa<ParmVarDecl>(var)) return isTensor(var.getType());
  if (!var.hasLocalStorage()) return false;
  if (var.getInit() && isRankData(var.getInit(), context, visiting)) return true;
  const FunctionDecl* function = match::enclosingFunction(DynTypedNode::create(var), context);
  bool rankData = false;
  if (function && function->getBody())
    walk(function->getBody(), [&](const Stmt& s) {
      if (rankData) return;
      const Expr *lhs = nullptr, *rhs = nullptr;
      if (const auto* op = dyn_cast<BinaryOperator>(&s); op && op->isAssignmentOp()) {
        lhs = op->getLHS();
        rhs = op->getRHS();
      } else if (const auto* op = dyn_cast<CXXOperatorCallExpr>(&s); op && op->isAssignmentOp()) {
        lhs = op->getArg(0);
        rhs = op->getArg(1);
      }
      if (lhs && localVariable(lhs) == &var && isRankData(rhs, context, visiting)) rankData = true;
    });
  return rankData;
}

bool isRankData(const Expr* e, ASTContext& context, std::set<const VarDecl*>& visiting) {
  bool found = false;
  std::function<void(const Stmt*)> visit = [&](const Stmt* s) {
    if (found || !s || isa<LambdaExpr>(s)) return;
    if (const auto* call = dyn_cast<CXXMemberCallExpr>(s); call && isShapeQuery(*call)) return;
    if (const auto* expr = dyn_cast<Expr>(s)) {
      if (isModuleForward(*expr) || isLoaderIteratorDereference(*expr)) {
        found = true;
        return;
      }
      if (const auto* ref = dyn_cast<DeclRefExpr>(expr))
        if (const auto* var = dyn_cast<VarDecl>(ref->getDecl()); var && holdsRankData(*var, context, visiting)) {
          found = true;
          return;
        }
    }
    for (const Stmt* child : s->children()) visit(child);
  };
  visit(e);
  return found;
}

}  // namespace

bool isPerRankValue(const Expr& e, ASTContext& context) {
  std::set<const VarDecl*> visiting;
  return isRankData(&e, context, visiting);
}

}  // namespace fabricize::metrics
