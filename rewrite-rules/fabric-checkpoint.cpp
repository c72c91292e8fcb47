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
  // archive.save_to(path) on a serialize::OutputArchive (a model saved
  // through module->save(archive)): without a Fabric every rank would write
  // the same file at once. save_to(stream) writes where its stream points
  // (an std::ofstream is fabric-rank-zero-file's, std::cout
  // fabric-rank-zero-print's).
  auto archive_save_to = [](auto object) {
    auto string_type = qualType(hasCanonicalType(hasDeclaration(recordDecl(hasName("::std::basic_string")))));
    auto save_to_path = cxxMethodDecl(hasName("save_to"), ofClass(hasName("::torch::serialize::OutputArchive")),
                                      hasParameter(0, hasType(references(string_type))));
    return cxxMemberCallExpr(callee(save_to_path), on(object), hasArgument(0, expr().bind("path")),
                             inFabricScope())
        .bind("call");
  };
  return {"fabric-checkpoint", "+",
          "torch::save(value, path) becomes fabric.save(path, value) (rank 0 writes, atomically), "
          "torch::load(value, path) becomes fabric.load(path, value), and an archive's "
          "save_to(path) becomes fabric.save(path, archive).",
          RuleKind::Rewrite,
          applyFirst<std::string>({
              makeRule(call("::torch::save"),
                       changeTo(node("call"), cat(edits::fabricMember("save("), node("path"), ", ", node("value"), ")")),
                       cat("rank 0 writes the checkpoint, atomically; every rank calls")),
              makeRule(call("::torch::load"),
                       changeTo(node("call"), cat(edits::fabricMember("load("), node("path"), ", ", node("value"), ")")),
                       cat("every rank loads the checkpoint onto its own device")),
              // `archive.save_to(path)`, or through a raw or smart pointer `archive->save_to(path)`.
              makeRule(archive_save_to(anyOf(cxxOperatorCallExpr(hasOverloadedOperatorName("->"),
                                                                 hasArgument(0, expr().bind("archive")))
                                                 .bind("pointer"),
                                             expr(expr(hasType(pointerType())).bind("archive")).bind("pointer"),
                                             expr().bind("archive"))),
                       changeTo(node("call"), cat(edits::fabricMember("save("), node("path"), ", ",
                                                  ifBound("pointer", cat("*"), cat("")), node("archive"), ")")),
                       cat("rank 0 writes the archive, atomically; every rank calls")),
          })};
}

}  // namespace fabricize
