// When training happens outside main, in a class that holds the optimizer
// (a Trainer declared in its own header), the Fabric is passed in: a
// `fabric::Fabric&` member, a constructor parameter in the declaration and
// the definition, the member initialised from it, and `fabric` passed where
// main constructs the class. The other rules then use the member.
#include "Edits.h"
#include "Matchers.h"
#include "RuleFactories.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/DeclCXX.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/TypeLoc.h"

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;

namespace {

using MatchResult = ast_matchers::MatchFinder::MatchResult;

llvm::SmallVector<Edit, 1> insertion(SourceLocation at, std::string text) {
  Edit edit;
  edit.Range = CharSourceRange::getCharRange(at, at);
  edit.Replacement = std::move(text);
  return {edit};
}

// The start of `loc`'s line and the whitespace that indents it.
std::pair<SourceLocation, std::string> lineOf(SourceLocation loc, const SourceManager& sm) {
  loc = sm.getExpansionLoc(loc);
  auto [file, offset] = sm.getDecomposedLoc(loc);
  llvm::StringRef text = sm.getBufferData(file);
  size_t start = text.rfind('\n', offset == 0 ? 0 : offset - 1);
  start = start == llvm::StringRef::npos ? 0 : start + 1;
  llvm::StringRef indent = text.slice(start, offset);
  indent = indent.take_while([](char c) { return c == ' ' || c == '\t'; });
  return {loc.getLocWithOffset(static_cast<int>(start) - static_cast<int>(offset)), indent.str()};
}

// `fabric::Fabric& fabric_;` above the class's first data member.
EditGenerator addMember() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* record = result.Nodes.getNodeAs<CXXRecordDecl>("class");
    auto field = record->field_begin();
    if (field == record->field_end()) return llvm::SmallVector<Edit, 1>();
    auto [lineStart, indent] = lineOf(field->getBeginLoc(), *result.SourceManager);
    return insertion(lineStart, indent + "fabric::Fabric& " + edits::threadedMemberName(*record) + ";\n");
  };
}

// `fabric::Fabric& fabric` first in the constructor's parameter list.
EditGenerator addParameter() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* ctor = result.Nodes.getNodeAs<CXXConstructorDecl>("ctor");
    if (ctor->getNumParams() > 0)
      return insertion(ctor->getParamDecl(0)->getBeginLoc(), "fabric::Fabric& fabric, ");
    FunctionTypeLoc type = ctor->getFunctionTypeLoc();
    if (!type) return llvm::SmallVector<Edit, 1>();
    return insertion(type.getLParenLoc().getLocWithOffset(1), "fabric::Fabric& fabric");
  };
}

// `fabric_(fabric)` first among the member initialisers: the member is
// declared first, and initialisers run in declaration order.
EditGenerator initialiseMember() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* ctor = result.Nodes.getNodeAs<CXXConstructorDecl>("ctor");
    std::string init = edits::threadedMemberName(*ctor->getParent()) + "(fabric)";
    for (const CXXCtorInitializer* each : ctor->inits())
      if (each->isWritten()) return insertion(each->getSourceLocation(), init + ", ");
    FunctionTypeLoc type = ctor->getFunctionTypeLoc();
    if (!type) return llvm::SmallVector<Edit, 1>();
    return insertion(type.getRParenLoc().getLocWithOffset(1), " : " + init);
  };
}

// `Trainer trainer(fabric, model, ...)` where the class is constructed.
EditGenerator passFabric() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* construct = result.Nodes.getNodeAs<CXXConstructExpr>("construct");
    std::string name = edits::fabricNameAt(result);
    if (construct->getNumArgs() > 0 && !isa<CXXDefaultArgExpr>(construct->getArg(0)))
      return insertion(construct->getArg(0)->getBeginLoc(), name + ", ");
    SourceRange parens = construct->getParenOrBraceRange();
    if (parens.isInvalid()) return llvm::SmallVector<Edit, 1>();
    return insertion(parens.getBegin().getLocWithOffset(1), name);
  };
}

}  // namespace

Rule makeThreadFabricRule(const FabricOptions&) {
  auto ctor = cxxConstructorDecl(ofClass(classNeedingFabric()), unless(isImplicit()),
                                 unless(isCopyConstructor()), unless(isMoveConstructor()),
                                 unless(isDeleted()))
                  .bind("ctor");
  auto construct =
      cxxConstructExpr(hasDeclaration(cxxConstructorDecl(ofClass(classNeedingFabric()),
                                                          unless(isCopyConstructor()),
                                                          unless(isMoveConstructor()))),
                       inFabricScope(),
                       unless(hasAncestor(cxxMethodDecl(ofClass(classNeedingFabric())))),
                       unless(isInTemplateInstantiation()))
          .bind("construct");
  auto explain = cat("the training loop lives in this class: the Fabric is passed in and kept "
                     "as a member");
  return {"fabric-thread-fabric", "+",
          "When a class that holds the optimizer runs the training loop (a Trainer in its own "
          "files), pass the Fabric in: a fabric::Fabric& member, a constructor parameter in the "
          "declaration and the definition, the member initialised from it, and `fabric` at the "
          "place main constructs the class.",
          RuleKind::Rewrite,
          applyFirst<std::string>({
              makeRule(cxxRecordDecl(classNeedingFabric()).bind("class"), addMember(), explain),
              // A definition gets the parameter and the initialiser together.
              makeRule(cxxConstructorDecl(ctor, isDefinition()),
                       flatten(addParameter(), initialiseMember()), explain),
              makeRule(ctor, addParameter(), explain),
              makeRule(construct, passFabric(), explain),
          })};
}

}  // namespace fabricize
