// Step 2: launch the processes right after the Fabric exists.
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

Rule makeLaunchRule() {
  auto launchCall = cxxMemberCallExpr(callee(cxxMethodDecl(hasName("launch"), ofClass(fabricClass()))));
  // main as fabric-insert leaves it: the launch goes right after the
  // construction that rule inserts at the same place.
  auto mainWithoutFabric = functionDecl(mainNeedingFabric(), hasBody(compoundStmt().bind("body")));

  // A Fabric the user declared but never launched.
  auto unlaunchedFabric = declStmt(hasSingleDecl(varDecl(hasType(fabricType())).bind("fabric")),
                                   hasAncestor(functionDecl(unless(hasDescendant(launchCall)))))
                              .bind("decl");
  return {
      "fabric-launch", "2", "Call fabric.launch() right after the Fabric is constructed.", RuleKind::Rewrite,
      applyFirst<std::string>(
          {makeRule(mainWithoutFabric,
                    insertBefore(edits::fabricInsertionPoint("body"),
                                 edits::fabricInsertionStatement("body", "fabric.launch();")),
                    cat("launch the processes before anything touches a device")),
           // The main fabric-insert declares a Fabric in only if what it calls needs one.
           makeRule(
               delegatingMain(),
               edits::declaringFabricInMain(insertBefore(edits::fabricInsertionPoint("body"),
                                                         edits::fabricInsertionStatement("body", "fabric.launch();"))),
               cat("launch the processes before anything touches a device")),
           makeRule(unlaunchedFabric,
                    insertAfter(node("decl"), cat("\n", edits::indentOf(node("decl")), name("fabric"), ".launch();")),
                    cat("launch the processes before anything touches a device"))})};
}

}  // namespace fabricize
