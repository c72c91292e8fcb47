// Issue 37: batches a training loop draws itself (synthetic data from
// torch::randn per step, torch::randint indices into the data set, an RL
// rollout's sampled actions) would be the same on every rank: the runtime
// gives every rank rank 0's seed, so that data made before the loop and the
// models agree. The loop opens a per-rank scope instead:
//   for (int step = 0; step < steps; ++step) {
//     auto per_rank_draws = fabric.per_rank_random();
//     auto idx = torch::randint(n, {bs});
// Inside it LibTorch's default generators draw from this rank's own stream
// (nothing changes with one process); the stream every rank shares is left
// where it was. The scope opens in the outermost loop of the function that
// trains and draws, so an RL rollout before the update is covered.
// Standard engines the loop draws from (an environment's std::mt19937, an
// epsilon-greedy distribution's engine) get their seed plus
// fabric::global_rank(): each rank plays its own episodes.
#include "rule-helpers/DataLoops.h"
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"
#include "rule-helpers/Statements.h"
#include "rule-helpers/Threading.h"

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;
using MatchResult = ast_matchers::MatchFinder::MatchResult;

namespace {

AST_MATCHER(Stmt, opensPerRankScope) { return dataloops::isPerRankScope(Node, Finder->getASTContext()); }

}  // namespace

Rule makePerRankRandomRule() {
  auto loop = stmt(anyLoop(), opensPerRankScope(), inFabricScope()).bind("loop");
  auto open = [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* loop = result.Nodes.getNodeAs<Stmt>("loop");
    const auto* body = dyn_cast_or_null<CompoundStmt>(statements::loopBody(*loop));
    if (!body || body->body_empty())
      return llvm::createStringError(llvm::inconvertibleErrorCode(), "the loop's body is not a block");
    llvm::SmallVector<Edit, 1> out;
    if (dataloops::drawsFromLibTorch(*loop, *result.Context)) {
      std::string statement = "auto per_rank_draws = " + edits::fabricNameAt(result) + ".per_rank_random();";
      out.push_back(edits::statementBefore(*body->body_front(), statement, *result.SourceManager));
    }
    for (const dataloops::SourceEdit& seed : dataloops::perRankEngineSeeds(*loop, *result.Context)) {
      Edit edit;
      edit.Range = CharSourceRange::getCharRange(seed.begin, seed.end);
      edit.Replacement = seed.replacement;
      out.push_back(edit);
      // fabric::global_rank() where the engine is (a header of its own).
      Edit include;
      include.Kind = EditKind::AddInclude;
      include.Range = CharSourceRange::getCharRange(seed.begin, seed.begin);
      include.Replacement = "fabric/fabric.h";
      out.push_back(include);
    }
    return out;
  };
  auto explain = run([](const MatchResult& result) -> llvm::Expected<std::string> {
    const auto* loop = result.Nodes.getNodeAs<Stmt>("loop");
    std::string draws;
    for (const std::string& draw : dataloops::drawsIn(*loop, *result.Context))
      draws += (draws.empty() ? "`" : ", `") + draw + "`";
    return "this loop draws its data itself (" + draws +
           "): each rank draws its own from here on (fabric.per_rank_random()), so N ranks train on N different "
           "batches; data made before the loop stays the same on every rank";
  });
  return {"fabric-per-rank-random", "+",
          "Open `auto per_rank_draws = fabric.per_rank_random();` in a training loop that draws its batches itself "
          "(torch::randn per step, torch::randint indices, an RL rollout), so each rank draws its own; standard "
          "engines it draws from get `+ fabric::global_rank()` on their seed.",
          RuleKind::Rewrite, makeRule(loop, open, explain)};
}

}  // namespace fabricize
