// Step 4 (continued): `torch::Device device(cuda ? kCUDA : kCPU);` becomes
// fabric.device(), or disappears when the other device rules consumed every
// use of it.
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

#include "clang/AST/ASTContext.h"

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;

namespace {

// Uses of `var` that survive fabric-device-move: every device argument of a
// module or tensor move is dropped or replaced by that rule.
size_t survivingUses(const VarDecl* var, const Stmt& body, ASTContext& context) {
  std::vector<SourceRange> consumed;
  auto moves =
      stmt(forEachDescendant(cxxMemberCallExpr(anyOf(callee(cxxMethodDecl(hasName("to"), ofClass(moduleClass()))),
                                                     callee(cxxMethodDecl(hasName("to"), ofClass(tensorClass())))),
                                               hasArgument(0, deviceArgument("device")))
                                 .bind("move")));
  for (const auto& nodes : ast_matchers::match(moves, body, context)) {
    // A move in a macro expansion (or a macro's argument) is left as it is
    // and reported by fabric-device-move: its use of the variable survives.
    const Expr* move = nodes.getNodeAs<Expr>("move");
    if (move->getBeginLoc().isMacroID() || move->getEndLoc().isMacroID()) continue;
    consumed.push_back(nodes.getNodeAs<Expr>("device")->getSourceRange());
  }
  const SourceManager& sm = context.getSourceManager();
  auto inside = [&](SourceLocation loc, SourceRange range) {
    return !sm.isBeforeInTranslationUnit(loc, range.getBegin()) && !sm.isBeforeInTranslationUnit(range.getEnd(), loc);
  };
  size_t uses = 0;
  for (const auto& nodes : ast_matchers::match(
           stmt(forEachDescendant(declRefExpr(to(varDecl(equalsNode(var)))).bind("use"))), body, context)) {
    SourceLocation loc = nodes.getNodeAs<DeclRefExpr>("use")->getBeginLoc();
    bool isConsumed = false;
    for (SourceRange range : consumed) isConsumed = isConsumed || inside(loc, range);
    if (!isConsumed) ++uses;
  }
  return uses;
}

// `Device(kCUDA, 0)` has two arguments: both give way to fabric.device().
auto lastArgument() { return optionally(hasArgument(1, expr(unless(cxxDefaultArgExpr())).bind("last"))); }
RangeSelector deviceArguments() {
  return [](const MatchFinder::MatchResult& result) -> llvm::Expected<CharSourceRange> {
    if (result.Nodes.getNodeAs<Expr>("last")) return encloseNodes("first", "last")(result);
    return node("first")(result);
  };
}

bool isUnused(const MatchFinder::MatchResult& result) {
  return survivingUses(result.Nodes.getNodeAs<VarDecl>("var"), *result.Nodes.getNodeAs<Stmt>("body"),
                       *result.Context) == 0;
}

}  // namespace

Rule makeDeviceVariableRule() {
  auto deviceVar = varDecl(hasType(recordNamed("::c10::Device")), hasInitializer(expr().bind("init")),
                           unless(hasInitializer(spelledAs(fabricDeviceCall()))),
                           unless(hasInitializer(hasDescendant(fabricDeviceCall()))),
                           // A fixed index is fabric-hardcoded-device's finding, for a person.
                           unless(hasInitializer(anyOf(indexedDevice(), hasDescendant(indexedDevice())))))
                       .bind("var");
  auto decl = declStmt(hasSingleDecl(deviceVar), hasAncestor(functionDecl(hasBody(stmt().bind("body"))))).bind("decl");
  // `torch::Device device(args)` / `torch::Device device = expr;`: the spelled
  // initialiser is what changes.
  auto constructed =
      declStmt(decl, hasSingleDecl(varDecl(hasInitializer(ignoringImplicit(
                         cxxConstructExpr(hasArgument(0, expr().bind("first")), lastArgument()).bind("construct"))))));
  EditGenerator removeOrRedirect =
      [](const MatchFinder::MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    if (isUnused(result)) return edit(edits::removeStatement("decl"))(result);
    return edit(changeTo(deviceArguments(), edits::fabricMember("device()")))(result);
  };
  Stencil explain = run([](const MatchFinder::MatchResult& result) -> llvm::Expected<std::string> {
    return isUnused(result) ? "device variable no longer used: the Fabric owns device placement"
                            : "the device is the one the Fabric assigned to this rank";
  });
  // `device_(cuda ? kCUDA : kCPU)` among the member initialisers of a class
  // that trains (fabric-thread-fabric passes it the Fabric as `fabric`).
  auto deviceInit = cxxCtorInitializer(
      isWritten(), forField(fieldDecl(hasType(recordNamed("::c10::Device")))),
      withInitializer(ignoringImplicit(cxxConstructExpr(
          unless(indexedDevice()), hasArgument(0, expr().bind("first")), lastArgument(),
          unless(hasArgument(0, spelledAs(fabricDeviceCall()))), unless(hasDescendant(fabricDeviceCall())),
          unless(hasDescendant(indexedDevice())), unless(hasDescendant(stringLiteral(isIndexedCudaDevice())))))));
  auto memberCtor =
      cxxConstructorDecl(isDefinition(), unless(isInstantiated()),
                         ofClass(anyOf(classNeedingFabric(), has(fieldDecl(hasType(valueOrReference(fabricType())))))),
                         forEachConstructorInitializer(deviceInit));
  // The member the class keeps the Fabric in (fabric-thread-fabric adds it
  // first, so it is initialised before the device).
  Stencil ctorFabricDevice = run([](const MatchFinder::MatchResult& result) -> llvm::Expected<std::string> {
    const auto* ctor = result.Nodes.getNodeAs<CXXConstructorDecl>("ctor");
    for (const FieldDecl* field : ctor->getParent()->fields())
      if (const auto* record = field->getType().getNonReferenceType()->getAsCXXRecordDecl())
        if (record->getQualifiedNameAsString() == "fabric::Fabric") return field->getName().str() + ".device()";
    return edits::threadedMemberName(*ctor->getParent()) + ".device()";
  });
  // `device = torch::Device(torch::kCUDA);` later on a local device variable
  // (`torch::Device device(torch::kCPU); if (cuda) device = ...;`): the rank's
  // device, or rank 1 would train on cuda:0 too.
  auto cuda = expr(anyOf(
      declRefExpr(to(namedDecl(anyOf(hasName("::c10::kCUDA"), enumConstantDecl(hasName("::c10::DeviceType::CUDA")))))),
      stringLiteral(isCudaDeviceString())));
  auto reassigned = cxxOperatorCallExpr(
      hasOverloadedOperatorName("="),
      hasArgument(
          0, ignoringParenImpCasts(declRefExpr(to(varDecl(hasLocalStorage(), hasType(recordNamed("::c10::Device"))))))),
      hasArgument(1,
                  expr(anyOf(hasDescendant(cuda), ignoringParenImpCasts(cuda)), unless(hasDescendant(indexedDevice())),
                       unless(indexedDevice()), unless(hasDescendant(fabricDeviceCall())))
                      .bind("value")),
      inFabricScope());
  return {"fabric-device-variable", "4",
          "A local torch::Device variable becomes fabric.device(), or is removed when every use "
          "of it was a device move the other rules removed, and a CUDA device assigned to it later "
          "(`if (cuda) device = torch::Device(torch::kCUDA);`) becomes fabric.device(); a "
          "torch::Device member initialised in a training class's constructor becomes fabric.device().",
          RuleKind::Rewrite,
          applyFirst<std::string>({
              makeRule(constructed, removeOrRedirect, explain),
              makeRule(memberCtor.bind("ctor"), changeTo(deviceArguments(), ctorFabricDevice),
                       cat("the device is the one the Fabric assigned to this rank")),
              makeRule(reassigned, changeTo(node("value"), edits::fabricMember("device()")),
                       cat("the device is the one the Fabric assigned to this rank")),
          })};
}

}  // namespace fabricize
