// Step 1: construct the Fabric at the top of main (after the argument parsing
// main starts with), and include its header.
#include "Edits.h"
#include "Matchers.h"
#include "RuleFactories.h"
#include "Threading.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

Rule makeInsertFabricRule(const FabricOptions& options) {
  auto mainWithoutFabric =
      functionDecl(mainNeedingFabric(), hasBody(compoundStmt().bind("body")))
          .bind("main");
  // A main that uses no LibTorch itself but calls the training code (`return
  // run(argc, argv);`) declares the Fabric only if a function it calls needs
  // one (Threading.h decides; the Declare fact says main can).
  auto delegatingMain = functionDecl(isMain(), isDefinition(), hasBody(compoundStmt(has(stmt())).bind("body")),
                                     unless(hasBody(hasDescendant(libTorchUse()))), mainFileDeclaresNoFabric())
                            .bind("main");
  auto declare = [](const MatchFinder::MatchResult& result) -> llvm::Any {
    const auto* main = result.Nodes.getNodeAs<clang::FunctionDecl>("main");
    return threading::Fact{threading::Fact::Declare, threading::functionKey(*main), "main", true, ""};
  };
  return {"fabric-insert", "1",
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
              makeRule(delegatingMain,
                       {withMetadata(insertBefore(edits::fabricInsertionPoint("body"),
                                                  edits::fabricInsertionStatement(
                                                      "body", edits::fabricDeclaration(options))),
                                     declare),
                        withMetadata(addInclude(node("main"), "fabric/fabric.h", IncludeFormat::Angled), declare)},
                       cat("construct the Fabric at the top of main: the training code it calls needs it")),
          })};
}

}  // namespace fabricize
