// Issue 37: a DataLoader class of the project's own (an index list it fills,
// shuffles per epoch and reads by a cursor, often in a shared utils/ library
// several projects use) is sharded once, where it is defined, not at each
// use:
//   std::vector<size_t> indices_;
//   std::vector<size_t> all_indices_;  // every rank's order; indices_ holds this rank's share
//   ...
//   std::shuffle(all_indices_.begin(), all_indices_.end(), rng_);
//   indices_ = fabric::shard(all_indices_);
// fabric::shard (<fabric/fabric.h>, no Fabric object needed) broadcasts rank
// 0's order and keeps this rank's strided share: padded to the same length
// on every rank while autograd is on (training), every index once under
// torch::NoGradGuard (evaluation). A class that makes a fresh order tensor
// each epoch gets it wrapped: `order_ = fabric::shard(torch::randperm(n))`.
// Where the class measures its epoch by the data set's size (`cursor_ <
// x_.size(0)`, `count_max = ceil(size / batch_size)`), it measures it by the
// share. Loops over the class's objects in other files learn that it was
// sharded through the fact this match provides (DataLoops.h).
#include "rule-helpers/DataLoops.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"
#include "rule-helpers/Threading.h"

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;
using MatchResult = ast_matchers::MatchFinder::MatchResult;

namespace {

AST_MATCHER(CXXRecordDecl, shardableLoaderClass) {
  const dataloops::LoaderClassPlan& plan = dataloops::loaderClassPlan(Node, Finder->getASTContext());
  return plan.clear && !plan.edits.empty();
}

}  // namespace

Rule makeShardLoaderClassRule() {
  auto record =
      cxxRecordDecl(isDefinition(), unless(isExpansionInSystemHeader()), shardableLoaderClass()).bind("class");
  auto shard = [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* record = result.Nodes.getNodeAs<CXXRecordDecl>("class");
    const dataloops::LoaderClassPlan& plan = dataloops::loaderClassPlan(*record, *result.Context);
    llvm::SmallVector<Edit, 1> out;
    for (const dataloops::SourceEdit& text : plan.edits) {
      Edit edit;
      edit.Range = CharSourceRange::getCharRange(text.begin, text.end);
      edit.Replacement = text.replacement;
      // Right whether or not a function around it gets a Fabric: it names
      // none (fabric::shard finds the launched one).
      edit.Metadata = threading::Fact{threading::Fact::Standalone, "", "", false, ""};
      out.push_back(edit);
    }
    // Loops over this class's objects in other files know it is sharded.
    out.front().Metadata =
        threading::Fact{threading::Fact::Provides, dataloops::loaderClassKey(*record), plan.name, false, ""};
    // A class that runs out (no ring, no random draws): a loop elsewhere
    // that counts its own passes over it outruns the share
    // (fabric-own-dataloader).
    if (!plan.randomSampler && !plan.wraps && out.size() > 1)
      out[1].Metadata = threading::Fact{threading::Fact::Provides, dataloops::loaderClassKey(*record) + "#runs-out",
                                        plan.name, false, ""};
    return out;
  };
  auto explain = run([](const MatchResult& result) -> llvm::Expected<std::string> {
    const auto* record = result.Nodes.getNodeAs<CXXRecordDecl>("class");
    const dataloops::LoaderClassPlan& plan = dataloops::loaderClassPlan(*record, *result.Context);
    if (plan.randomSampler)
      return "class `" + plan.name + "`: it draws at random with `" + plan.member + "` (in " + plan.reason +
             "), now seeded per rank (+ fabric::global_rank()): each rank draws batches, or plays episodes, of its "
             "own";
    return "loader class `" + plan.name + "`: each rank reads its share of `" + plan.member +
           "` (rank 0's order, every world_size()-th index from its rank; the same count on every rank while "
           "training, every index once in an evaluation), and the class measures its epoch by that share";
  });
  return {
      "fabric-shard-loader-class", "+",
      "Shard a DataLoader class of the project's own where it is defined: the index list it fills, shuffles and "
      "reads by a cursor gives each rank its share (`indices_ = fabric::shard(all_indices_);` after each place "
      "that makes the epoch's order), and the epoch is measured by that share.",
      RuleKind::Rewrite,
      makeRule(record, flatten(shard, addInclude(node("class"), "fabric/fabric.h", IncludeFormat::Angled)), explain)};
}

}  // namespace fabricize
