// Diagnostic: a training loop that does not read its batches from a data
// loader the Fabric sets up (a batching class of the project's own, slices
// of a tensor by index, the whole data set each step) makes every rank train
// on all of the data: the ranks stay in sync (they average equal gradients)
// but do N times the work for nothing. A person shards the data.
#include "Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

Rule makeOwnDataLoaderRule() {
  // The innermost loop around a backward pass, not inside a loop over a
  // loader, and not reading batches through a loader's iterator (in the loop,
  // or in a function it calls: a trainer's next_batch()).
  auto readsLoaderIterator =
      anyOf(hasDescendant(loaderIteratorRead()),
            hasDescendant(callExpr(callee(functionDecl(hasBody(hasDescendant(loaderIteratorRead())))))));
  // A loop over a template parameter (`template <class Loader> ... for (auto&
  // b : loader)`) is judged in its instantiations: a header's template that
  // one translation unit instantiates with a loader is not reported from
  // another that includes it without instantiating it.
  auto dependentRange = cxxForRangeStmt(hasRangeInit(expr(isTypeDependent())));
  auto loop =
      stmt(trainingLoop(), unless(hasDescendant(trainingLoop())), unless(loaderLoop()),
           unless(hasAncestor(loaderLoop())), unless(dependentRange), unless(hasAncestor(dependentRange)),
           unless(readsLoaderIterator), unless(hasAncestor(stmt(anyLoop(), readsLoaderIterator))), inFabricScope())
          .bind("loop");
  return {
      "fabric-own-dataloader", "+",
      "Report a training loop whose batches do not come from a data loader (a batching class "
      "of the project's own, index slices of a tensor): every rank would train on all of the "
      "data. Shard it: a torch::data dataset through fabric.setup_dataloader, or each rank "
      "taking its part by fabric.global_rank() and fabric.world_size().",
      RuleKind::Diagnostic,
      applyFirst<std::string>({
          // Where a batching class of the project's own shuffles its list of
          // indices (`std::shuffle(indices_.begin(), indices_.end(), rng_)` in
          // its reset()): the exact place to take this rank's share. The loop
          // that reads it is reported in its own file.
          makeRule(
              callExpr(callee(functionDecl(hasAnyName("::std::shuffle", "::std::random_shuffle"))),
                       hasArgument(0, cxxMemberCallExpr(
                                          callee(cxxMethodDecl(hasName("begin"))),
                                          on(memberExpr(member(
                                              fieldDecl(hasType(qualType(hasCanonicalType(
                                                            recordType(hasDeclaration(classTemplateSpecializationDecl(
                                                                hasName("::std::vector"),
                                                                hasTemplateArgument(0, refersToType(isInteger())))))))))
                                                  .bind("indices")))))),
                       hasAncestor(cxxMethodDecl()), inFabricScope())
                  .bind("shuffle"),
              noopEdit(node("shuffle")),
              cat("a data loader of the project's own shuffles its list of indices `", name("indices"),
                  "` here, and after the migration every rank reads all of it (N times the work): shard it "
                  "here. Keep the full list in another member and take this rank's share after the "
                  "shuffle, `",
                  name("indices"),
                  " = fabric.shard(all_indices);` (rank 0's order, every "
                  "fabric.world_size()-th index from fabric.global_rank()), or draw each epoch's indices "
                  "with fabric::DistributedIndexSampler (<fabric/index_sampler.h>: the same permutation on "
                  "every rank, this rank's part, padded or every sample once)")),
          makeRule(loop, noopEdit(node("loop")),
                   cat("this training loop does not read its batches from a data loader: after the "
                       "migration every rank trains on all of the data (N times the work, no "
                       "speed-up). Shard it: wrap the data in a torch::data::Dataset and iterate "
                       "fabric.setup_dataloader<torch::data::samplers::RandomSampler>(dataset, "
                       "batch_size), or have each rank take the batches i with i % "
                       "fabric.world_size() == fabric.global_rank() (a loader class of the project's own: "
                       "fabric.shard or fabric::DistributedIndexSampler where it shuffles its indices)")),
      })};
}

}  // namespace fabricize
