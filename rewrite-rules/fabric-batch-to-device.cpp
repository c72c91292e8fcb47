// Fabric loaders hand out batches already on the device. They move a batch
// with fabric::to_device, which knows tensors, Example<>, and the standard
// containers; a batch type of the user's own (a dataset's example type or a
// collation's output) gets an overload right after its definition, in its
// namespace, where argument-dependent lookup finds it.
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/DeclCXX.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/Basic/SourceManager.h"

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;

namespace {

bool isTensor(QualType type) {
  const auto* record = type.getCanonicalType()->getAsCXXRecordDecl();
  return record && record->getQualifiedNameAsString() == "at::Tensor";
}

// A field whose type holds tensors inside something else (a vector, an
// optional, a nested batch): fabric::to_device walks it.
bool holdsTensors(QualType type) {
  return !isTensor(type) && type.getCanonicalType().getAsString().find("at::Tensor") != std::string::npos;
}

// Whether a `to_device(const Batch&, ...)` is declared already (by the user,
// or by an earlier run of fabricize).
AST_MATCHER(CXXRecordDecl, hasToDeviceOverload) {
  const DeclContext* scope = Node.getDeclContext()->getRedeclContext();
  IdentifierInfo& name = Finder->getASTContext().Idents.get("to_device");
  for (const NamedDecl* found : scope->lookup(DeclarationName(&name))) {
    const auto* function = found->getAsFunction();
    if (!function || function->getNumParams() == 0) continue;
    QualType first = function->getParamDecl(0)->getType().getNonReferenceType().getUnqualifiedType();
    if (const auto* record = first->getAsCXXRecordDecl())
      if (record->getCanonicalDecl() == Node.getCanonicalDecl()) return true;
  }
  return false;
}

AST_MATCHER(CXXRecordDecl, isNamespaceScope) { return Node.getDeclContext()->getRedeclContext()->isFileContext(); }

// The overload, placed on the line after the definition's `};`.
EditGenerator addOverload() {
  return [](const MatchFinder::MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* batch = result.Nodes.getNodeAs<CXXRecordDecl>("batch");
    const SourceManager& sm = *result.SourceManager;
    SourceLocation close = sm.getExpansionLoc(batch->getBraceRange().getEnd());
    auto [file, offset] = sm.getDecomposedLoc(close);
    llvm::StringRef text = sm.getBufferData(file);
    size_t semicolon = text.find(';', offset);
    size_t lineEnd = semicolon == llvm::StringRef::npos ? llvm::StringRef::npos : text.find('\n', semicolon);
    if (lineEnd == llvm::StringRef::npos)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "no line end after the definition of the batch type");
    std::string type = batch->getName().str();
    std::string body;
    bool needsFabric = false;
    for (const FieldDecl* field : batch->fields()) {
      std::string name = field->getName().str();
      if (isTensor(field->getType())) {
        body += "  moved." + name + " = batch." + name + ".to(device);\n";
      } else if (holdsTensors(field->getType())) {
        body += "  moved." + name + " = fabric::to_device(batch." + name + ", device);\n";
        needsFabric = true;
      }
    }
    std::string eol = lineEnd > 0 && text[lineEnd - 1] == '\r' ? "\r\n" : "\n";
    std::string overload = eol + "// Fabric loaders move each batch to the rank's device with this overload" + eol +
                           "// (found by argument-dependent lookup; see fabric/to_device.h)." + eol + "inline " + type +
                           " to_device(const " + type + "& batch, const torch::Device& device) {" + eol + "  " + type +
                           " moved = batch;" + eol;
    llvm::StringRef lines(body);
    while (!lines.empty()) {
      auto [line, rest] = lines.split('\n');
      overload += line.str() + eol;
      lines = rest;
    }
    overload += "  return moved;" + eol + "}" + eol;
    SourceLocation at = close.getLocWithOffset(static_cast<int>(lineEnd + 1 - offset));
    Edit insertion;
    insertion.Range = CharSourceRange::getCharRange(at, at);
    insertion.Replacement = overload;
    llvm::SmallVector<Edit, 1> out{insertion};
    if (needsFabric) {
      Edit include;
      include.Kind = EditKind::AddInclude;
      include.Range = CharSourceRange::getCharRange(at, at);
      include.Replacement = "fabric/fabric.h";
      out.push_back(include);
    }
    return out;
  };
}

}  // namespace

Rule makeBatchToDeviceRule() {
  // A class of the user's that holds tensors directly, and no overload yet.
  auto userBatch =
      cxxRecordDecl(isDefinition(), unless(isImplicit()), unless(isLambda()), unless(isExpansionInSystemHeader()),
                    unless(hasAncestor(namespaceDecl(hasName("::torch")))),
                    has(fieldDecl(hasType(recordTypeOf(tensorClass())))), unless(hasToDeviceOverload()));
  // A Dataset whose example type is `batch`, or a Collation that makes one.
  auto producerOf = [](DeclarationMatcher batch) {
    auto argument = [&](unsigned index) { return hasTemplateArgument(index, refersToType(recordTypeOf(batch))); };
    return cxxRecordDecl(isDefinition(), unless(isExpansionInSystemHeader()), unless(isInstantiated()),
                         isDerivedFrom(classTemplateSpecializationDecl(
                             anyOf(allOf(hasName("::torch::data::datasets::Dataset"), argument(1)),
                                   allOf(hasName("::torch::data::transforms::Collation"), argument(0))))));
  };
  auto explain =
      cat("Fabric loaders move batches to the device with to_device(batch, device): this "
          "batch type gets its overload");
  auto nested =
      cat("not migrated: the batch type is nested in a class; declare `friend Batch "
          "to_device(const Batch&, const torch::Device&)` in it by hand, so Fabric loaders "
          "can move it to the device");
  return {"fabric-batch-to-device", "3",
          "A batch type of the user's own (a Dataset's example type or a Collation's output) that "
          "holds tensors gets a to_device(batch, device) overload after its definition, so Fabric "
          "loaders deliver it on the device.",
          RuleKind::Rewrite,
          applyFirst<std::string>({
              makeRule(producerOf(cxxRecordDecl(userBatch, isNamespaceScope()).bind("batch")), addOverload(), explain),
              makeRule(producerOf(cxxRecordDecl(userBatch, unless(isNamespaceScope())).bind("batch")),
                       noopEdit(node("batch")), nested),
          })};
}

}  // namespace fabricize
