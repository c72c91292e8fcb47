#include "rule-helpers/Types.h"

namespace fabricize::match {

using namespace clang;

bool derivesFrom(const CXXRecordDecl& record, llvm::StringRef qualifiedName) {
  if (record.getQualifiedNameAsString() == qualifiedName) return true;
  const CXXRecordDecl* definition = record.getDefinition();
  if (!definition) return false;
  for (const CXXBaseSpecifier& base : definition->bases())
    if (const auto* parent = base.getType()->getAsCXXRecordDecl())
      if (derivesFrom(*parent, qualifiedName)) return true;
  return false;
}

const Type* heldBy(QualType type, llvm::StringRef pointer) {
  const auto* record = type.getNonReferenceType()->getAsCXXRecordDecl();
  const auto* spec = dyn_cast_or_null<ClassTemplateSpecializationDecl>(record);
  if (!spec || spec->getQualifiedNameAsString() != pointer || spec->getTemplateArgs().size() == 0 ||
      spec->getTemplateArgs()[0].getKind() != TemplateArgument::Type)
    return nullptr;
  return spec->getTemplateArgs()[0].getAsType().getTypePtr();
}

namespace {
// The class a smart pointer holds, or the type's own class.
const CXXRecordDecl* recordThroughSmartPointer(QualType type) {
  for (llvm::StringRef pointer : {"std::unique_ptr", "std::shared_ptr"})
    if (const Type* held = heldBy(type, pointer)) return held->getAsCXXRecordDecl();
  return type.getNonReferenceType()->getAsCXXRecordDecl();
}
}  // namespace

bool isOptimizerHandle(QualType type) {
  type = type.getNonReferenceType();
  if (const auto* pointer = type->getAs<PointerType>()) type = pointer->getPointeeType();
  const CXXRecordDecl* record = recordThroughSmartPointer(type);
  return record && derivesFrom(*record, "torch::optim::Optimizer");
}

bool isModuleType(QualType type) {
  const CXXRecordDecl* record = recordThroughSmartPointer(type);
  if (!record || !record->hasDefinition()) return false;
  return derivesFrom(*record, "torch::nn::Module") || derivesFrom(*record, "torch::nn::ModuleHolder");
}

bool isUniquePointerToModule(QualType type) {
  const Type* held = heldBy(type, "std::unique_ptr");
  return held && isModuleType(QualType(held, 0));
}

}  // namespace fabricize::match
