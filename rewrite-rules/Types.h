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

// The type a std::unique_ptr / std::shared_ptr (named `pointer`) holds, or null.
inline const clang::Type* heldBy(clang::QualType type, llvm::StringRef pointer) {
  const auto* record = type.getNonReferenceType()->getAsCXXRecordDecl();
  const auto* spec = llvm::dyn_cast_or_null<clang::ClassTemplateSpecializationDecl>(record);
  if (!spec || spec->getQualifiedNameAsString() != pointer || spec->getTemplateArgs().size() == 0 ||
      spec->getTemplateArgs()[0].getKind() != clang::TemplateArgument::Type)
    return nullptr;
  return spec->getTemplateArgs()[0].getAsType().getTypePtr();
}

bool isModuleType(clang::QualType type);
// A module held by std::unique_ptr (`auto net = std::make_unique<Net>()`):
// the Fabric's API takes it as `*net`, the module it owns.
inline bool isUniquePointerToModule(clang::QualType type) {
  const clang::Type* held = heldBy(type, "std::unique_ptr");
  return held && isModuleType(clang::QualType(held, 0));
}

// A module type: a ModuleHolder, a Module, or a shared_ptr or unique_ptr to one.
inline bool isModuleType(clang::QualType type) {
  const auto* record = type.getNonReferenceType()->getAsCXXRecordDecl();
  if (!record || !record->hasDefinition()) return false;
  for (llvm::StringRef pointer : {"std::shared_ptr", "std::unique_ptr"})
    if (const clang::Type* held = heldBy(type, pointer)) return isModuleType(clang::QualType(held, 0));
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
