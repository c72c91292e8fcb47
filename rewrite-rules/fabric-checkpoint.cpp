// Checkpoints go through the Fabric: every rank calls, rank 0 writes
// atomically, so ranks do not fight over one file.
#include "Edits.h"
#include "Matchers.h"
#include "Metrics.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

namespace {

// A model or an optimizer, however held: the training state a checkpoint
// holds. A tensor (a data file, a cache of tokens, a preview image) is data.
AST_MATCHER(clang::Expr, isTrainingState) {
  clang::QualType type = Node.getType();
  return isModuleType(type) || isOptimizerHandle(type);
}

AST_MATCHER(clang::Expr, isPerRankValue) { return metrics::isPerRankValue(Node, Finder->getASTContext()); }

}  // namespace

Rule makeCheckpointRule() {
  auto call = [](llvm::StringRef function) {
    return callExpr(callee(functionDecl(hasName(function))), argumentCountIs(2), hasArgument(0, expr().bind("value")),
                    hasArgument(1, expr().bind("path")), inFabricScope())
        .bind("call");
  };
  auto save = cat(edits::fabricMember("save("), node("path"), ", ", node("value"), ")");
  // A save that only some ranks reach (`if (avg_reward > best) torch::save(...)`
  // on this rank's reward) cannot be the collective fabric.save: rank 0
  // writes when its own condition holds.
  auto perRankBranch = hasAncestor(ifStmt(hasCondition(expr(isPerRankValue()).bind("condition"))));
  // archive.save_to(path) on a serialize::OutputArchive (a model saved
  // through module->save(archive)): without a Fabric every rank would write
  // the same file at once. save_to(stream) writes where its stream points
  // (an std::ofstream is fabric-rank-zero-file's, std::cout
  // fabric-rank-zero-print's).
  auto archive_save_to = [](auto object) {
    auto string_type = qualType(hasCanonicalType(hasDeclaration(recordDecl(hasName("::std::basic_string")))));
    auto save_to_path = cxxMethodDecl(hasName("save_to"), ofClass(hasName("::torch::serialize::OutputArchive")),
                                      hasParameter(0, hasType(references(string_type))));
    return cxxMemberCallExpr(callee(save_to_path), on(object), hasArgument(0, expr().bind("path")), inFabricScope())
        .bind("call");
  };
  return {
      "fabric-checkpoint", "+",
      "torch::save(value, path) becomes fabric.save(path, value) (rank 0 writes, atomically), "
      "torch::load(value, path) becomes fabric.load(path, value), and an archive's "
      "save_to(path) becomes fabric.save(path, archive).",
      RuleKind::Rewrite,
      applyFirst<std::string>({
          // Already on one rank (`if (fabric.is_global_zero())`): the
          // collective fabric.save there would wait for the others.
          makeRule(callExpr(call("::torch::save"), onOneRankOnly()), noEdits(), cat("written on one rank")),
          makeRule(cxxMemberCallExpr(archive_save_to(expr()), onOneRankOnly()), noEdits(), cat("written on one rank")),
          makeRule(callExpr(call("::torch::save"), perRankBranch, isWholeStatement()),
                   flatten(insertBefore(node("call"), cat("if (", edits::fabricMember("is_global_zero()"), ") ")),
                           noopEdit(node("condition"))),
                   cat("this save is reached only on ranks where this condition holds, and it differs "
                       "between ranks (computed from each rank's own batches): it cannot be the collective "
                       "fabric.save, so rank 0 writes when its own condition holds; to decide on all the "
                       "data, all-reduce the value first (`value = fabric.all_reduce(value, "
                       "fabric::ReduceOp::Mean);`) and call fabric.save on every rank")),
          makeRule(callExpr(call("::torch::save"), hasArgument(0, isTrainingState())), changeTo(node("call"), save),
                   cat("rank 0 writes the checkpoint, atomically; every rank calls. It holds what the "
                       "original saved; for a resume that continues exactly (the loader's place, every "
                       "rank's random generators, the schedulers, the step counters) save a fabric::State "
                       "instead: docs/runtime.md, \"Exact resume\"")),
          // Data (a tensor cache every rank reads back): written once, by
          // rank 0, before any rank reads it; where the function gets no
          // Fabric, every rank writing the same bytes is left as it is.
          makeRule(call("::torch::save"), edits::optionalEdit(changeTo(node("call"), save)),
                   cat("rank 0 writes the file, atomically, before any rank reads it; every rank calls")),
          // Loading a model or an optimizer; a tensor read from a file is
          // data every rank reads itself.
          makeRule(callExpr(call("::torch::load"), hasArgument(0, isTrainingState())),
                   changeTo(node("call"), cat(edits::fabricMember("load("), node("path"), ", ", node("value"), ")")),
                   cat("every rank loads the checkpoint onto its own device")),
          // `archive.save_to(path)`, or through a raw or smart pointer `archive->save_to(path)`.
          makeRule(archive_save_to(anyOf(
                       cxxOperatorCallExpr(hasOverloadedOperatorName("->"), hasArgument(0, expr().bind("archive")))
                           .bind("pointer"),
                       expr(expr(hasType(pointerType())).bind("archive")).bind("pointer"), expr().bind("archive"))),
                   changeTo(node("call"), cat(edits::fabricMember("save("), node("path"), ", ",
                                              ifBound("pointer", cat("*"), cat("")), node("archive"), ")")),
                   cat("rank 0 writes the archive, atomically; every rank calls")),
      })};
}

}  // namespace fabricize
