#include "rule-helpers/RankValues.h"

#include "rule-helpers/Accumulators.h"
#include "rule-helpers/Matchers.h"
#include "rule-helpers/Statements.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/StmtCXX.h"

#include <set>

namespace fabricize::rankvalues {

using namespace clang;

namespace {

using metrics::localVariable;
bool isTensor(QualType type) { return statements::isTensorType(type); }
void walk(const Stmt* s, const std::function<void(const Stmt&)>& visit) {
  statements::forEach(s, visit, /*intoLambdas=*/false);
}

struct Search {
  ASTContext& context;
  const std::function<bool(const VarDecl&)>& madeAlike;
  std::set<const VarDecl*> visiting;
};

// `v.size()`, `v.empty()`, `v.length()` on an object that is not a tensor.
bool isContainerLength(const CXXMemberCallExpr& call) {
  const CXXMethodDecl* method = call.getMethodDecl();
  if (!method || !method->isConst() || isTensor(call.getImplicitObjectArgument()->getType())) return false;
  llvm::StringRef name = match::plainName(method);
  return name == "size" || name == "empty" || name == "length";
}

// A class whose objects are no tally of values: the Fabric (its backward
// takes this rank's loss), modules, optimizers, streams, loaders.
bool feedsNoTally(QualType type) {
  const auto* record = type.getNonReferenceType()->getAsCXXRecordDecl();
  if (!record) return true;
  for (const char* name : {"fabric::Fabric", "torch::nn::Module", "torch::nn::ModuleHolder", "torch::optim::Optimizer",
                           "std::basic_ostream", "std::basic_ios", "torch::data::DataLoaderBase", "fabric::DataLoader"})
    if (match::derivesFrom(*record, name)) return true;
  return match::isModuleType(type) || match::isOptimizerHandle(type);
}

bool isShapeQuery(const CXXMemberCallExpr& call) {
  const CXXMethodDecl* method = call.getMethodDecl();
  if (!method || !isTensor(call.getImplicitObjectArgument()->getType())) return false;
  llvm::StringRef name = match::plainName(method);
  return name == "size" || name == "sizes" || name == "numel" || name == "dim" || name == "ndimension" ||
         name == "sym_size" || name == "sym_sizes" || name == "dtype" || name == "scalar_type" || name == "device";
}

bool isModuleForward(const Expr& e) {
  if (const auto* call = dyn_cast<CXXMemberCallExpr>(&e)) {
    const CXXMethodDecl* method = call->getMethodDecl();
    return method && match::plainName(method) == "forward" &&
           match::derivesFrom(*method->getParent(), "torch::nn::Module");
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
bool isRankData(const Expr* e, Search& search);

bool holdsRankData(const VarDecl& var, Search& search, bool throughFeeds = true);

// A container's length is every rank's alike when only what it is fed
// differs (a rollout of fixed length: each rank's values, as many of them);
// a container made or assigned from this rank's data (`auto wrong =
// misclassified(prediction, target)`) has a length of its own. (A length
// each rank plays to its own end is fabric-own-dataloader's finding.)
bool lengthIsEveryRanks(const CXXMemberCallExpr& call, Search& search) {
  const VarDecl* var = localVariable(call.getImplicitObjectArgument());
  if (!var) return false;
  Search fresh{search.context, search.madeAlike, {}};
  return !holdsRankData(*var, fresh, /*throughFeeds=*/false);
}

bool holdsRankData(const VarDecl& var, Search& search, bool throughFeeds) {
  ASTContext& context = search.context;
  if (!search.visiting.insert(&var).second) return false;
  if (isLoaderLoopVariable(var, context)) return true;
  if (search.madeAlike(var)) return false;  // made the same on every rank (all-reduced)
  // A tensor handed in: its origin is the caller's; a batch, most likely.
  if (isa<ParmVarDecl>(var)) return isTensor(var.getType());
  if (!var.hasLocalStorage()) return false;
  if (var.getInit() && isRankData(var.getInit(), search)) return true;
  const FunctionDecl* function = match::enclosingFunction(DynTypedNode::create(var), context);
  bool rankData = false;
  if (function && function->getBody())
    walk(function->getBody(), [&](const Stmt& s) {
      if (rankData) return;
      auto [lhs, rhs] = statements::assignmentSides(s);
      if (lhs && localVariable(lhs) == &var && isRankData(rhs, search)) rankData = true;
      // A container or meter fed this rank's values (`recent.push_back(
      // episode_return)`): what it answers (a window's mean) is per rank.
      if (const auto* call = dyn_cast<CXXMemberCallExpr>(&s);
          throughFeeds && call && call->getMethodDecl() && !call->getMethodDecl()->isConst() &&
          localVariable(call->getImplicitObjectArgument()) == &var && !feedsNoTally(var.getType()))
        for (const Expr* argument : call->arguments())
          if (!rankData && isRankData(argument, search)) rankData = true;
    });
  return rankData;
}

bool isRankData(const Expr* e, Search& search) {
  bool found = false;
  std::function<void(const Stmt*)> visit = [&](const Stmt* s) {
    if (found || !s || isa<LambdaExpr>(s)) return;
    if (const auto* call = dyn_cast<CXXMemberCallExpr>(s); call && isShapeQuery(*call)) return;
    if (const auto* call = dyn_cast<CXXMemberCallExpr>(s);
        call && isContainerLength(*call) && lengthIsEveryRanks(*call, search))
      return;
    // An object of the program's own made from tensors (a loader, a data
    // set: `ShuffledRows rows(x, 16)`) holds data; what it answers about
    // it (`rows.rows()`) is the same on every rank.
    if (const auto* construct = dyn_cast<CXXConstructExpr>(s);
        construct && construct->getNumArgs() > 0 && !isTensor(construct->getType())) {
      const auto* record = construct->getType()->getAsCXXRecordDecl();
      if (record && !record->isInStdNamespace()) return;
    }
    if (const auto* expr = dyn_cast<Expr>(s)) {
      if (isModuleForward(*expr) || isLoaderIteratorDereference(*expr)) {
        found = true;
        return;
      }
      if (const auto* ref = dyn_cast<DeclRefExpr>(expr))
        if (const auto* var = dyn_cast<VarDecl>(ref->getDecl()); var && holdsRankData(*var, search)) {
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

bool isPerRankValue(const Expr& e, ASTContext& context, const std::function<bool(const VarDecl&)>& madeAlike) {
  Search search{context, madeAlike, {}};
  return isRankData(&e, search);
}

}  // namespace fabricize::rankvalues
