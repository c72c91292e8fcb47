// Where a training or evaluation loop gets its data, and how each rank takes
// its share of it: the one analysis behind the sharding rules
// (fabric-shard-index-loop, fabric-shard-elements, fabric-shard-loader-class,
// fabric-per-rank-random), the loops fabric-reduce-metric all-reduces after,
// what fabric-own-dataloader reports, and the line fabric-data-loop writes
// into the migration report for every training loop. One plan per loop, so
// the rules never disagree about a loop.
//
// The shapes (issue 37; docs/sharding.md):
//   IndexRange    `for (T i = a; i < n; i += bs)` whose counter only indexes
//                 data made before the loop (slices, get(i), v[i]):
//                 `for (T i : fabric.shard_range<T>(a, n, bs))`
//   Elements      `for (auto& b : batches)` over a container made before the
//                 loop: `for (auto& b : fabric.shard_elements(batches))`
//   OwnLoader     batches from an object of the project's own loader class
//                 (`while (loader(batch))`): the class is sharded where it is
//                 defined (LoaderClassPlan)
//   PerRankDraws  batches drawn in the loop (torch::randn, torch::randint
//                 indices, an RL rollout's sampling): the loop's draws come
//                 from this rank's own stream (fabric.per_rank_random())
// Permutations a sharded loop reads by position (`torch::randperm`,
// `std::shuffle`) become rank 0's on every rank (fabric.randperm,
// fabric.shuffle), so the ranks' shares never overlap.
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/DeclCXX.h"
#include "clang/AST/Expr.h"
#include "clang/AST/Stmt.h"
#include "clang/AST/StmtCXX.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/Tooling/Transformer/RewriteRule.h"

#include <string>
#include <vector>

namespace fabricize::dataloops {

// A draw of a permutation that a sharded loop reads by position: rewritten
// so that every rank uses rank 0's.
struct Agreement {
  const clang::Expr* call = nullptr;  // torch::randperm(...) or std::shuffle(...)
  bool stdShuffle = false;            // std::shuffle (-> fabric.shuffle), else torch::randperm (-> fabric.randperm)
};

struct SourceEdit {
  clang::SourceLocation begin, end;  // a character range; begin == end inserts
  std::string replacement;
};

struct LoopPlan {
  enum Kind {
    NotData,         // no data read per iteration (`reason` says what it is)
    FabricLoader,    // a torch::data / Fabric loader: fabric-setup-dataloader's
    AlreadySharded,  // by hand (`i % world_size == rank`) or already migrated
    IndexRange,
    Elements,
    OwnLoader,
    PerRankDraws,
    NeedsPerson,  // data read in a shape the tool cannot shard: `reason` and `edit`
    Covered,      // a loop inside the data loop (micro-batches, k steps per batch): `dataLoop` plans it
  };
  Kind kind = NotData;
  bool training = false;  // runs a backward pass (directly or through a call)
  const clang::Stmt* loop = nullptr;

  // IndexRange: the loop's header, from its `(` to its `)`, becomes
  // `(<counter declaration> : <fabric>.shard_range<T>(<begin>, <end>[, <step>]))`.
  clang::SourceLocation headerOpen, headerClose;
  std::string counterDeclaration;  // `int64_t i`, as written
  std::string rangeArguments;      // `<int64_t>(0, n, bs)`
  // Elements: the range-for's range expression.
  const clang::Expr* range = nullptr;
  std::vector<Agreement> agreements;
  // OwnLoader: the loader class whose objects the loop reads.
  const clang::CXXRecordDecl* loaderClass = nullptr;
  // Covered: the loop around it that reads the data.
  const clang::Stmt* dataLoop = nullptr;

  // NeedsPerson because the loop reads data made inside the loops around it
  // (each rank's own, an RL rollout's): per-rank draws may be the plan.
  bool perRankData = false;
  // NotData: an evaluation-like loop that sums a loss a backward pass after
  // it reads (the loop around it trains on the sum).
  bool sumsLoss = false;
  // OwnLoader over a class whose code is in another file: the loop counts
  // its own passes, which outruns the share if that file shards the class as
  // one that runs out (not a ring). The key it provides then (Threading.h);
  // `reason` and `edit` say what to do.
  std::string runsOutKey;
  // The loader class is sharded, but the loop counts more passes than the
  // share holds (`reason` says how).
  bool outrunsShare = false;
  std::string reason;  // NotData, NeedsPerson: why, in a sentence
  std::string edit;    // NeedsPerson: the exact change a person makes
};

// The plan for `loop`, cached per loop. A loop that neither runs a backward
// pass nor sums metrics it reads afterwards is NotData.
const LoopPlan& planFor(const clang::Stmt& loop, clang::ASTContext& context);

// A training loop whose data the migration plans: the innermost loop around
// a backward pass, or a loop around it that reads the data for it (the loop
// over batches around a micro-batch loop). One per training loop: what the
// migration report lists and fabric-own-dataloader reports.
bool isTrainingDataLoop(const clang::Stmt& loop, clang::ASTContext& context);

// Whether the loop's data is split across ranks after the migration (by the
// Fabric's loader, the loop's own edit, or its loader class).
bool isShardedPlan(const LoopPlan& plan);

// `loop` runs a backward pass: directly, or through a function or method
// of the project's (definition in this translation unit) it calls, up to
// two calls deep.
bool runsBackward(const clang::Stmt& loop, clang::ASTContext& context);
// A training loop: runs a backward pass, and no loop inside it does.
bool isInnermostTrainingLoop(const clang::Stmt& loop, clang::ASTContext& context);

// The loop of the function around `loop` whose body opens the per-rank
// random scope for draws made while `loop` trains (an RL rollout before the
// update, a batch drawn per step): the outermost loop of that function that
// runs a backward pass and draws random numbers the ranks must not share.
// Null when the loop draws nothing of the kind.
const clang::Stmt* perRankScopeLoop(const clang::Stmt& loop, clang::ASTContext& context);
// The draws that put the scope there, for the explanation: `torch::randint`.
std::vector<std::string> drawsIn(const clang::Stmt& scopeLoop, clang::ASTContext& context);
// Whether those draws include LibTorch's (the per-rank scope is opened for
// them; standard engines get per-rank seeds instead).
bool drawsFromLibTorch(const clang::Stmt& scopeLoop, clang::ASTContext& context);
// Whether `loop` is such a scope for a training loop in it, and opens none yet.
bool isPerRankScope(const clang::Stmt& loop, clang::ASTContext& context);

// Standard random engines the scope's loop draws from (an environment's
// `std::mt19937`, an epsilon-greedy `std::uniform_real_distribution`'s
// engine), seeded alike on every rank: their seed plus
// `fabric::global_rank()`, so each rank plays its own episodes. Locals
// declared before the loop, and members of the project's classes whose
// initializer is in this translation unit. An engine seeded from
// std::random_device or the clock already differs per process.
std::vector<SourceEdit> perRankEngineSeeds(const clang::Stmt& scopeLoop, clang::ASTContext& context);

// The edits that make a plan's permutations rank 0's: `torch::randperm` ->
// `<fabric>.randperm`, `std::shuffle` -> `<fabric>.shuffle`.
llvm::SmallVector<clang::transformer::Edit, 1> agreementEdits(
    const std::vector<Agreement>& agreements, const std::string& fabric,
    const clang::ast_matchers::MatchFinder::MatchResult& result);

// --- A loader class of the project's own ------------------------------------
// A class whose objects hand out batches by position in a list of indices
// (a std::vector of integers, or a 1-D index tensor) that it fills,
// shuffles per epoch and reads by a cursor:
//   indices_ (vector, shuffled in place) -> the full order moves to a new
//       member `all_indices_`, and after each place that makes the order,
//       `indices_ = fabric::shard(all_indices_);`
//   order_ = torch::randperm(n) (a fresh tensor each epoch) ->
//       `order_ = fabric::shard(torch::randperm(n));`
// and every place that measures the epoch by the data set's size (`cursor_ <
// x_.size(0)`, `count_max = ceil(size / batch)`) measures it by the share.
struct LoaderClassPlan {
  bool clear = false;    // every edit below is known to be right
  bool sharded = false;  // already calls fabric::shard (migrated code)
  // No order: it draws each batch's indices at random from an engine of its
  // own (`member`), which the edits seed per rank.
  bool randomSampler = false;
  // Its readers wrap the cursor around the order (a ring): it never runs
  // out, and a loop may count its own passes over it.
  bool wraps = false;
  std::string name;    // `DataLoader`
  std::string member;  // the order member
  std::string reason;  // !clear: why
  std::string edit;    // !clear: what a person does
  std::vector<SourceEdit> edits;
  clang::SourceLocation where;  // the order member's declaration
  // Every method of the class has its body in this translation unit: `where`
  // invalid then means it is no loader class the tool follows, not that
  // another file decides.
  bool seenHere = false;
};
// Nothing (`where` invalid) when `record` is not a loader class or its
// methods are not all defined in this translation unit (the one that
// defines them decides).
const LoaderClassPlan& loaderClassPlan(const clang::CXXRecordDecl& record, clang::ASTContext& context);
// A class of the project's own that hands out batches through a call in a
// loop's condition or body: the class of `object` in `while (loader(batch))`,
// `while (it.has_next()) it.next()`, `loader.next_batch()`.
const clang::CXXRecordDecl* ownLoaderClassOf(const clang::Stmt& loop, clang::ASTContext& context);
// The same without asking for a list of indices in the class (whose code may
// be elsewhere): where a loop gets its batches, to name it in a finding.
const clang::CXXRecordDecl* batchSourceClassOf(const clang::Stmt& loop, clang::ASTContext& context);
// The key fabric-shard-loader-class provides and the loops over the class's
// objects need (Threading.h), so a loop in main.cpp over a class sharded in
// dataloader.cpp knows it.
std::string loaderClassKey(const clang::CXXRecordDecl& record);

// The calls in `s` on objects of a loader class the migration shards that
// measure this rank's share (a method reading its order: `loader.size()`,
// `loader.num_batches()`): a sum all-reduced over the ranks divided by one
// must be divided by their sum.
std::vector<const clang::CallExpr*> shareMeasures(const clang::Stmt* s, const clang::CXXRecordDecl& loaderClass,
                                                  clang::ASTContext& context);

// Forget the plans made for the translation unit that ends (they point into
// its AST): called where a translation unit starts or ends.
void forgetTranslationUnit();

// A loop whose data the migration splits across ranks (isShardedPlan; a
// Fabric loader only as a range-for over it).
AST_MATCHER(clang::Stmt, shardedDataLoop) {
  const LoopPlan& plan = planFor(Node, Finder->getASTContext());
  if (plan.kind == LoopPlan::FabricLoader) return llvm::isa<clang::CXXForRangeStmt>(Node);
  return plan.kind == LoopPlan::IndexRange || plan.kind == LoopPlan::Elements || plan.kind == LoopPlan::OwnLoader;
}

}  // namespace fabricize::dataloops
