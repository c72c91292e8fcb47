// Diagnostic: gradients or metrics all-reduced by hand (MPI, a c10d process
// group). The Fabric already averages gradients in backward; doing it again
// double-counts, and its own all_reduce works for metrics.
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

Rule makeManualAllReduceRule() {
  auto mpi = callExpr(callee(functionDecl(hasName("::MPI_Allreduce"))));
  auto processGroup =
      cxxMemberCallExpr(callee(cxxMethodDecl(hasAnyName("allreduce", "allreduce_coalesced"),
                                             ofClass(cxxRecordDecl(anyOf(isSameOrDerivedFrom("::c10d::ProcessGroup"),
                                                                         isSameOrDerivedFrom("::c10d::Backend")))))));
  auto use = expr(anyOf(mpi, processGroup)).bind("use");
  return {"fabric-manual-allreduce", "+",
          "Report hand-written all-reduce (MPI_Allreduce, c10d ProcessGroup::allreduce): the "
          "Fabric already averages gradients in backward; use fabric.all_reduce for metrics.",
          RuleKind::Diagnostic,
          makeRule(use, noopEdit(node("use")),
                   cat("hand-written all-reduce: fabric.backward already averages gradients "
                       "(doing it again double-counts); for metrics use fabric.all_reduce"))};
}

}  // namespace fabricize
