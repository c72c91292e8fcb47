// Step 1: construct the Fabric at the top of main (after the argument parsing
// main starts with), and include its header.
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

Rule makeInsertFabricRule(const FabricOptions& options) {
  auto mainWithoutFabric = functionDecl(mainNeedingFabric(), hasBody(compoundStmt().bind("body"))).bind("main");

  return {
      "fabric-insert", "1",
      "Construct fabric::Fabric at the top of main (after the argument parsing it starts "
      "with) with the chosen options and include "
      "<fabric/fabric.h>.",
      RuleKind::Rewrite,
      applyFirst<std::string>({
          makeRule(mainWithoutFabric,
                   {insertBefore(edits::fabricInsertionPoint("body"),
                                 edits::fabricInsertionStatement("body", edits::fabricDeclaration(options))),
                    addInclude(node("main"), "fabric/fabric.h", IncludeFormat::Angled)},
                   cat("construct the Fabric at the top of main")),
          // A main that only calls the training code declares the Fabric
          // if what it calls needs one.
          makeRule(delegatingMain(),
                   {edits::declaringFabricInMain(
                        insertBefore(edits::fabricInsertionPoint("body"),
                                     edits::fabricInsertionStatement("body", edits::fabricDeclaration(options)))),
                    edits::declaringFabricInMain(addInclude(node("main"), "fabric/fabric.h", IncludeFormat::Angled))},
                   cat("construct the Fabric at the top of main: the training code it calls needs it")),
      })};
}

}  // namespace fabricize
