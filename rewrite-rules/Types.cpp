#include "Types.h"

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

bool isOptimizerHandle(QualType type) {
  type = type.getNonReferenceType();
  if (const auto* pointer = type->getAs<PointerType>()) type = pointer->getPointeeType();
  const auto* record = type->getAsCXXRecordDecl();
  if (!record) return false;
  if (const auto* spec = dyn_cast<ClassTemplateSpecializationDecl>(record)) {
    std::string name = spec->getQualifiedNameAsString();
    if ((name == "std::unique_ptr" || name == "std::shared_ptr") && spec->getTemplateArgs().size() > 0 &&
        spec->getTemplateArgs()[0].getKind() == TemplateArgument::Type)
      record = spec->getTemplateArgs()[0].getAsType()->getAsCXXRecordDecl();
    if (!record) return false;
  }
  return derivesFrom(*record, "torch::optim::Optimizer");
}

}  // namespace fabricize::match
