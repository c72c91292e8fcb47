#include "Matchers.h"

#include "Optimizers.h"
#include "Threading.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/DeclTemplate.h"

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
  if (const auto* method = dyn_cast<CXXMethodDecl>(pattern))
    if (holdsFabricOrOptimizer(*method->getParent())) return false;
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

}  // namespace fabricize::match
