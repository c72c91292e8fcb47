// What a type is in LibTorch's terms: a module, what holds an optimizer, a
// class derived from a named one. Plain predicates on Clang's AST, below both
// the matchers (Matchers.h) and the optimizer finder (Optimizers.h), which
// both need them.
#pragma once

#include "clang/AST/DeclCXX.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/AST/Type.h"
#include "llvm/ADT/StringRef.h"

#include <functional>
#include <string>

namespace fabricize::match {

// Whether `type` (a field's, say) holds an optimizer: by value, reference or
// raw pointer, or through a std::unique_ptr or std::shared_ptr (to the
// optimizer's own class or to the base torch::optim::Optimizer).
bool isOptimizerHandle(clang::QualType type);
// `record` is the class named `qualifiedName` ("torch::nn::Module") or derives from it.
bool derivesFrom(const clang::CXXRecordDecl& record, llvm::StringRef qualifiedName);

// A module type: a ModuleHolder, a Module, or a shared_ptr to one.
inline bool isModuleType(clang::QualType type) {
  const auto* record = type.getNonReferenceType()->getAsCXXRecordDecl();
  if (!record || !record->hasDefinition()) return false;
  if (const auto* spec = llvm::dyn_cast<clang::ClassTemplateSpecializationDecl>(record))
    if (spec->getQualifiedNameAsString() == "std::shared_ptr" && spec->getTemplateArgs().size() > 0)
      return isModuleType(spec->getTemplateArgs()[0].getAsType());
  std::function<bool(const clang::CXXRecordDecl&)> derives = [&](const clang::CXXRecordDecl& r) {
    std::string name = r.getQualifiedNameAsString();
    if (name == "torch::nn::Module" || name == "torch::nn::ModuleHolder") return true;
    if (!r.hasDefinition()) return false;
    for (const clang::CXXBaseSpecifier& base : r.getDefinition()->bases())
      if (const auto* parent = base.getType()->getAsCXXRecordDecl())
        if (derives(*parent)) return true;
    return false;
  };
  return derives(*record);
}

}  // namespace fabricize::match
