// Step 3: fabric.setup(model, optimizers...) once the optimizers exist.
#include "Edits.h"
#include "Matchers.h"
#include "RuleFactories.h"

#include "clang/AST/ASTContext.h"
#include "clang/Tooling/Transformer/SourceCode.h"

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;

namespace {

// Every optimizer over `model` declared in `body`, in source order.
std::vector<const VarDecl*> optimizersOver(const ValueDecl* model, const Stmt& body,
                                           ASTContext& context) {
  std::vector<const VarDecl*> result;
  for (const auto& nodes : ast_matchers::match(
           stmt(forEachDescendant(varDecl(optimizerOver(equalsNode(model))).bind("opt"))), body,
           context))
    result.push_back(nodes.getNodeAs<VarDecl>("opt"));
  return result;
}

// One setup call covers all optimizers of a model, so it goes after the last
// of them and names them all.
EditGenerator setupAfterLastOptimizer() {
  return [](const MatchFinder::MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* model = result.Nodes.getNodeAs<ValueDecl>("model");
    const auto* optimizer = result.Nodes.getNodeAs<VarDecl>("optimizer");
    const auto* body = result.Nodes.getNodeAs<Stmt>("body");
    auto all = optimizersOver(model, *body, *result.Context);
    if (all.empty() || all.back() != optimizer) return llvm::SmallVector<Edit, 1>();
    std::string arguments =
        tooling::getText(*result.Nodes.getNodeAs<Expr>("modelRef"), *result.Context).str();
    for (const VarDecl* each : all) arguments += ", " + each->getName().str();
    using edits::fabricNameAt;
    return edit(insertAfter(node("decl"), cat("\n", edits::indentOf(node("decl")),
                                              fabricNameAt(result) + ".setup(", arguments, ");")))(result);
  };
}

}  // namespace

Rule makeSetupRule(const FabricOptions&) {
  auto parameters = cxxMemberCallExpr(
      callee(cxxMethodDecl(hasAnyName("parameters", "named_parameters"), ofClass(moduleClass()))),
      on(moduleReference("model")));
  auto optimizer =
      varDecl(hasType(optimizerType()), hasInitializer(hasDescendant(parameters))).bind("optimizer");
  auto setupPoint =
      declStmt(hasSingleDecl(optimizer),
               hasAncestor(functionDecl(fabricScopeFunction(), hasBody(stmt().bind("body")))),
               unless(hasAncestor(
                   functionDecl(hasDescendant(fabricSetupOf(equalsBoundNode("model")))))),
               unless(isInTemplateInstantiation()))
          .bind("decl");
  // The model is set up, but this optimizer over it is not among the setup's
  // arguments (added by hand after a migration, say): a person adds it.
  auto setupNaming = [](const std::string& optimizerId) {
    return cxxMemberCallExpr(callee(cxxMethodDecl(hasName("setup"), ofClass(fabricClass()))),
                             hasAnyArgument(ignoringParenImpCasts(
                                 declRefExpr(to(varDecl(equalsBoundNode(optimizerId)))))));
  };
  auto forgotten =
      declStmt(hasSingleDecl(optimizer),
               hasAncestor(functionDecl(hasDescendant(fabricSetupOf(equalsBoundNode("model"))),
                                        unless(hasDescendant(setupNaming("optimizer"))))),
               unless(isInTemplateInstantiation()))
          .bind("decl");
  return {"fabric-setup", "3",
          "Insert fabric.setup(model, optimizers...) after the last optimizer over the model is "
          "constructed: it moves the model to the device, broadcasts rank 0's weights and wraps "
          "it for the strategy. An optimizer over a set-up model that the setup does not name is "
          "reported.",
          RuleKind::Rewrite,
          applyFirst<std::string>({
              makeRule(setupPoint, setupAfterLastOptimizer(),
                       cat("set up the model and its optimizers with the Fabric")),
              makeRule(forgotten, noopEdit(node("decl")),
                       cat("optimizer over a set-up model that fabric.setup does not name: pass it "
                           "too (fabric.setup(model, optimizer, ...)) so the strategy and the "
                           "precision see its steps")),
          })};
}

}  // namespace fabricize
