// Step 3 (data): make_data_loader becomes a Fabric loader: distributed
// sampler when there are several ranks, batches delivered on the device.
#include "Edits.h"
#include "Matchers.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

Rule makeSetupDataLoaderRule(const FabricOptions&) {
  auto makeDataLoader =
      callExpr(callee(functionDecl(hasName("::torch::data::make_data_loader"))),
               callee(expr(ignoringImplicit(declRefExpr().bind("callee")))),
               inFabricScope())
          .bind("call");
  return {"fabric-setup-dataloader", "3",
          "Replace torch::data::make_data_loader<Sampler>(dataset, options) with "
          "fabric.setup_dataloader<Sampler>(dataset, options): a distributed sampler on several "
          "ranks (reshuffled every epoch) and batches that arrive on the device.",
          RuleKind::Rewrite,
          applyFirst<std::string>({
              makeRule(callExpr(makeDataLoader, argumentCountIs(2)),
                       changeTo(enclose(node("callee"), name("callee")),
                                edits::fabricMember("setup_dataloader")),
                       cat("let the Fabric shard the data set and move batches to the device")),
              // A sampler object the user built: its sharding is theirs to decide.
              makeRule(makeDataLoader, noopEdit(node("call")),
                       cat("data loader with an explicit sampler object: not migrated; give each "
                           "rank its own shard (e.g. torch::data::samplers::DistributedRandomSampler "
                           "with fabric.world_size() and fabric.global_rank())")),
          })};
}

}  // namespace fabricize
