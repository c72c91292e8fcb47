// What a type is in LibTorch's terms: a module, what holds an optimizer, a
// class derived from a named one. Plain predicates on Clang's AST, below both
// the matchers (Matchers.h) and the optimizer finder (Optimizers.h), which
// both need them.
#pragma once

#include "clang/AST/DeclCXX.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/AST/Type.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace fabricize::match {

// Whether `type` (a field's, say) holds an optimizer: by value, reference or
// raw pointer, or through a std::unique_ptr or std::shared_ptr (to the
// optimizer's own class or to the base torch::optim::Optimizer).
bool isOptimizerHandle(clang::QualType type);
// `record` is the class named `qualifiedName` ("torch::nn::Module") or derives from it.
bool derivesFrom(const clang::CXXRecordDecl& record, llvm::StringRef qualifiedName);

// What a std::unique_ptr or std::shared_ptr (`pointer` names which) holds;
// null for any other type.
const clang::Type* heldBy(clang::QualType type, llvm::StringRef pointer);

// A module type: a ModuleHolder, a Module, or a shared_ptr or unique_ptr to one.
bool isModuleType(clang::QualType type);
// A module held by std::unique_ptr (`auto net = std::make_unique<Net>()`):
// the Fabric's API takes it as `*net`, the module it owns.
bool isUniquePointerToModule(clang::QualType type);

// The name of a function as written when it is a plain identifier; empty for
// operators, constructors, destructors and conversions (getName() asserts on
// those, and a callee met while walking any statement may be one of them).
inline llvm::StringRef plainName(const clang::NamedDecl* decl) {
  return decl && decl->getDeclName().isIdentifier() ? decl->getName() : llvm::StringRef();
}

}  // namespace fabricize::match
