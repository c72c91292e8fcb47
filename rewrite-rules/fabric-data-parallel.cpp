// torch::nn::parallel::data_parallel splits a batch over the visible GPUs
// inside one process; under the Fabric every process owns one device and
// the two would fight over them. The call becomes a plain forward, wherever
// it is (also in a helper that needs no Fabric of its own).
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

#include "clang/Tooling/Transformer/SourceCode.h"
#include "clang/Tooling/Transformer/SourceCodeBuilders.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

namespace {

// `<module>->`, the module as spelled, parenthesised where `->` would bind
// tighter than it: `(*holder)->`, `(many ? a : b)->`. (data_parallel takes
// the module by value: the bound argument is its copy, whose text is the
// argument's.)
Stencil arrowOn(std::string id) {
  return run([id](const clang::ast_matchers::MatchFinder::MatchResult& result) -> llvm::Expected<std::string> {
    const auto* module = result.Nodes.getNodeAs<clang::Expr>(id);
    if (!module) return llvm::make_error<llvm::StringError>("no node bound to " + id, llvm::inconvertibleErrorCode());
    std::string text = clang::tooling::getText(*module, *result.Context).str();
    return clang::tooling::needParensBeforeDotOrArrow(*module) ? "(" + text + ")->" : text + "->";
  });
}

}  // namespace

Rule makeDataParallelRule() {
  auto dataParallel =
      callExpr(callee(functionDecl(hasName("::torch::nn::parallel::data_parallel"))),
               hasArgument(0, expr().bind("module")), hasArgument(1, expr().bind("input")), inFabricScope())
          .bind("call");
  return {
      "fabric-data-parallel", "+",
      "Replace torch::nn::parallel::data_parallel(model, input, ...) with "
      "model->forward(input): the Fabric owns parallelism, one device per process.",
      RuleKind::Rewrite,
      makeRule(dataParallel,
               edits::standaloneEdit(changeTo(node("call"), cat(arrowOn("module"), "forward(", node("input"), ")"))),
               cat("the Fabric runs one process per device; single-process data parallelism "
                   "would compete with it"))};
}

}  // namespace fabricize
