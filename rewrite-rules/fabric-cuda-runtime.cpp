// Diagnostic: raw CUDA device and stream management. Under the Fabric each
// process is bound to its own device; cudaSetDevice or hand-made streams
// may contradict that, and only a person can say what they were for.
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

Rule makeCudaRuntimeRule() {
  auto cudaRuntime = functionDecl(hasAnyName("::cudaSetDevice", "::cudaStreamCreate", "::cudaStreamCreateWithFlags",
                                             "::cudaStreamCreateWithPriority", "::c10::cuda::set_device",
                                             "::c10::cuda::getStreamFromPool", "::c10::cuda::setCurrentCUDAStream"));
  auto call = callExpr(callee(cudaRuntime)).bind("use");
  auto stream = varDecl(hasType(recordNamed("::c10::cuda::CUDAStream")), unless(isInstantiated())).bind("use");
  auto explain =
      cat("raw CUDA device or stream management: each rank already runs on "
          "fabric.device(); check this still does what it should, then remove or keep it");
  return {"fabric-cuda-runtime", "+",
          "Report cudaSetDevice, CUDA stream creation and CUDAStream variables: they may "
          "contradict the Fabric's one-device-per-process placement.",
          RuleKind::Diagnostic,
          applyFirst<std::string>(
              {makeRule(call, noopEdit(node("use")), explain), makeRule(stream, noopEdit(node("use")), explain)})};
}

}  // namespace fabricize
