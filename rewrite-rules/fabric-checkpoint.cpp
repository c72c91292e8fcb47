// Checkpoints go through the Fabric: every rank calls, rank 0 writes
// atomically, so ranks do not fight over one file.
#include "Edits.h"
#include "Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

Rule makeCheckpointRule(const FabricOptions&) {
  auto call = [](llvm::StringRef function) {
    return callExpr(callee(functionDecl(hasName(function))), argumentCountIs(2),
                    hasArgument(0, expr().bind("value")), hasArgument(1, expr().bind("path")),
                    inFabricScope())
        .bind("call");
  };
  return {"fabric-checkpoint", "+",
          "torch::save(value, path) becomes fabric.save(path, value) (rank 0 writes, atomically) "
          "and torch::load(value, path) becomes fabric.load(path, value).",
          RuleKind::Rewrite,
          applyFirst<std::string>({
              makeRule(call("::torch::save"),
                       changeTo(node("call"), cat(edits::fabricMember("save("), node("path"), ", ", node("value"), ")")),
                       cat("rank 0 writes the checkpoint, atomically; every rank calls")),
              makeRule(call("::torch::load"),
                       changeTo(node("call"), cat(edits::fabricMember("load("), node("path"), ", ", node("value"), ")")),
                       cat("every rank loads the checkpoint onto its own device")),
          })};
}

}  // namespace fabricize
