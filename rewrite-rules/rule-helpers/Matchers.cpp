#include "rule-helpers/Matchers.h"

#include "rule-helpers/Optimizers.h"
#include "rule-helpers/Threading.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/DeclTemplate.h"
#include "llvm/Support/Path.h"

namespace fabricize::match {

using namespace clang;

namespace {

bool isFabric(QualType type) {
  const auto* record = type.getNonReferenceType()->getAsCXXRecordDecl();
  return record && record->getQualifiedNameAsString() == "fabric::Fabric";
}

}  // namespace

bool holdsFabricOrOptimizer(const CXXRecordDecl& record) {
  for (const FieldDecl* field : record.fields())
    if (isFabric(field->getType()) || isOptimizerHandle(field->getType())) return true;
  return false;
}

namespace {

// The nearest base class (or `record` itself) that holds the Fabric or an
// optimizer, and whether the path to it lets `record` name its members.
const CXXRecordDecl* keeperOf(const CXXRecordDecl& record, bool nameable) {
  if (holdsFabricOrOptimizer(record)) return &record;
  for (const CXXBaseSpecifier& base : record.bases()) {
    if (base.isVirtual() || (nameable && base.getAccessSpecifier() == AS_private)) continue;
    const CXXRecordDecl* parent = base.getType()->getAsCXXRecordDecl();
    if (!parent || !parent->hasDefinition()) continue;
    parent = parent->getDefinition();
    // LibTorch's and the standard library's classes are never edited: a
    // scheduler derived from torch::optim::LRScheduler (which holds the
    // optimizer it steers) keeps no Fabric.
    const SourceManager& sm = parent->getASTContext().getSourceManager();
    if (sm.isInSystemHeader(sm.getExpansionLoc(parent->getLocation())) || isInLibTorchHeader(*parent, sm)) continue;
    const CXXRecordDecl* keeper = keeperOf(*parent, nameable);
    if (!keeper || !nameable) {
      if (keeper) return keeper;
      continue;
    }
    // Its Fabric member (or the first data member, above which it will go)
    // must be one a derived class may name.
    const FieldDecl* place = nullptr;
    for (const FieldDecl* field : keeper->fields())
      if (isFabric(field->getType())) place = field;
    if (!place && keeper->field_begin() != keeper->field_end()) place = *keeper->field_begin();
    if (place && place->getAccess() != AS_private) return keeper;
  }
  return nullptr;
}

}  // namespace

const CXXRecordDecl* fabricHolderOf(const CXXRecordDecl& record) { return keeperOf(record, /*nameable=*/true); }

bool derivesFromClassGettingFabric(const CXXRecordDecl& record) {
  if (holdsFabricOrOptimizer(record)) return false;
  const CXXRecordDecl* keeper = keeperOf(record, /*nameable=*/false);
  if (!keeper) return false;
  for (const FieldDecl* field : keeper->fields())
    if (isFabric(field->getType())) return false;
  return true;
}

namespace {

// A statement that ends the function or the program as a failure.
bool failsHere(const Stmt& statement, ASTContext& context) {
  const Stmt* s = &statement;
  if (const auto* cleanups = dyn_cast<ExprWithCleanups>(s)) s = cleanups->getSubExpr();
  if (const auto* expression = dyn_cast<Expr>(s)) s = expression->IgnoreParenImpCasts();
  if (isa<CXXThrowExpr>(s)) return true;
  const auto nonZeroConstant = [&context](const Expr* value) {
    if (value == nullptr || value->isValueDependent() || value->isTypeDependent()) return false;
    value = value->IgnoreParenImpCasts();
    if (value->getType()->isBooleanType()) return false;  // `return false` is no exit code
    Expr::EvalResult result;
    return value->getType()->isIntegerType() && value->EvaluateAsInt(result, context) && result.Val.getInt() != 0;
  };
  if (const auto* ret = dyn_cast<ReturnStmt>(s)) return nonZeroConstant(ret->getRetValue());
  if (const auto* call = dyn_cast<CallExpr>(s)) {
    const FunctionDecl* callee = call->getDirectCallee();
    if (callee == nullptr || !callee->getIdentifier()) return false;
    const StringRef name = plainName(callee);
    if (name == "abort" || name == "terminate") return true;
    if ((name == "exit" || name == "_exit" || name == "_Exit" || name == "quick_exit") && call->getNumArgs() == 1)
      return nonZeroConstant(call->getArg(0));
  }
  return false;
}

bool refersTo(const Stmt& statement, const VarDecl& variable) {
  if (const auto* ref = dyn_cast<DeclRefExpr>(&statement); ref && ref->getDecl() == &variable) return true;
  for (const Stmt* child : statement.children())
    if (child && refersTo(*child, variable)) return true;
  return false;
}

}  // namespace

bool isOnErrorPath(const Stmt& node, ASTContext& context) {
  DynTypedNode current = DynTypedNode::create(node);
  const Stmt* statement = nullptr;  // the print's statement in its innermost block
  while (true) {
    const DynTypedNodeList parents = context.getParents(current);
    if (parents.empty()) return false;
    const DynTypedNode& parent = parents[0];
    if (const auto* handler = parent.get<CXXCatchStmt>()) {
      // A handler that fails, or a message that shows the exception (a
      // rank skipping its bad sample says so); not the load-or-start-fresh
      // idiom's `catch (...) { std::cout << "starting fresh\n"; }`.
      if (const auto* body = dyn_cast_or_null<CompoundStmt>(handler->getHandlerBlock())) {
        for (const Stmt* s : body->body())
          if (s && failsHere(*s, context)) return true;
      }
      const VarDecl* caught = handler->getExceptionDecl();
      return caught && statement && refersTo(*statement, *caught);
    }
    if (parent.get<FunctionDecl>() || parent.get<LambdaExpr>() || parent.get<BlockDecl>()) return false;
    if (const auto* block = parent.get<CompoundStmt>(); block && !statement) {
      // Only the innermost block: `if (!ok) { std::cout << ...; return 1; }`.
      statement = current.get<Stmt>();
      bool after = false;
      for (const Stmt* s : block->body()) {
        if (after && s && failsHere(*s, context)) return true;
        if (s == statement) after = true;
      }
    }
    current = parent;
  }
}

bool isThreadableFunction(const FunctionDecl& function, ASTContext& context) {
  const FunctionDecl* pattern = &function;
  while (const FunctionDecl* p = pattern->getTemplateInstantiationPattern()) {
    if (p == pattern) break;
    pattern = p;
  }
  const SourceManager& sm = context.getSourceManager();
  if (pattern->isImplicit() || pattern->isMain() || pattern->isDeleted() || pattern->isDefaulted() ||
      sm.isInSystemHeader(sm.getExpansionLoc(pattern->getLocation())))
    return false;
  if (!threading::blockedReason(*pattern).empty()) return false;
  for (const ParmVarDecl* parameter : pattern->parameters())
    if (isFabric(parameter->getType())) return false;
  // A method of a class that keeps the Fabric, or whose base does, uses
  // the member.
  if (const auto* method = dyn_cast<CXXMethodDecl>(pattern))
    if (fabricHolderOf(*method->getParent())) return false;
  if (const FunctionDecl* definition = pattern->getDefinition())
    if (const Stmt* body = definition->getBody()) {
      using namespace ast_matchers;
      if (!ast_matchers::match(stmt(hasDescendant(varDecl(hasType(fabricType())))), *body, context).empty())
        return false;
    }
  return true;
}

const FunctionDecl* enclosingFunction(const DynTypedNode& node, ASTContext& context) {
  DynTypedNode current = node;
  for (int depth = 0; depth < 256; ++depth) {
    DynTypedNodeList parents = context.getParents(current);
    if (parents.empty()) return nullptr;
    if (const auto* function = parents[0].get<FunctionDecl>()) {
      const auto* method = dyn_cast<CXXMethodDecl>(function);
      if (!method || !method->getParent()->isLambda()) return function;
    }
    current = parents[0];
  }
  return nullptr;
}

bool isTrainedAround(const Stmt& statement, const ValueDecl& model, ASTContext& context) {
  const FunctionDecl* function = enclosingFunction(DynTypedNode::create(statement), context);
  if (!function) return false;
  for (const optimizers::Creation& creation : optimizers::creationsIn(*function, context))
    for (const optimizers::Model& trained : creation.models)
      if (trained.decl == &model) return true;
  return false;
}

bool isInLibTorchHeader(const clang::Decl& decl, const clang::SourceManager& sm) {
  // A declaration of the template's pattern, where its text is.
  const clang::Decl* written = &decl;
  if (const auto* record = llvm::dyn_cast<clang::CXXRecordDecl>(&decl))
    if (const clang::CXXRecordDecl* pattern = record->getTemplateInstantiationPattern()) written = pattern;
  clang::SourceLocation at = sm.getExpansionLoc(written->getLocation());
  if (at.isInvalid() || sm.isInSystemHeader(at)) return true;
  llvm::StringRef file = sm.getFilename(at);
  if (file.empty()) return true;  // no file (a builtin): never the project's
  for (auto part = llvm::sys::path::begin(file), end = llvm::sys::path::end(file); part != end; ++part)
    if (*part == "torch" || *part == "ATen" || *part == "c10") return true;
  return false;
}

}  // namespace fabricize::match
