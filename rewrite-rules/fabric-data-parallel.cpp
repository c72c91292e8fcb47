// torch::nn::parallel::data_parallel splits a batch over the visible GPUs
// inside one process; under the Fabric every process owns one device and
// the two would fight over them. The call becomes a plain forward.
#include "Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

Rule makeDataParallelRule(const FabricOptions&) {
  auto dataParallel =
      callExpr(callee(functionDecl(hasName("::torch::nn::parallel::data_parallel"))),
               hasArgument(0, expr().bind("module")), hasArgument(1, expr().bind("input")),
               inFabricScope())
          .bind("call");
  return {"fabric-data-parallel", "+",
          "Replace torch::nn::parallel::data_parallel(model, input, ...) with "
          "model->forward(input): the Fabric owns parallelism, one device per process.",
          RuleKind::Rewrite,
          makeRule(dataParallel,
                   changeTo(node("call"), cat(node("module"), "->forward(", node("input"), ")")),
                   cat("the Fabric runs one process per device; single-process data parallelism "
                       "would compete with it"))};
}

}  // namespace fabricize
