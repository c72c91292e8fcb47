// Sums and per-rank values in training code: what fabric-reduce-metric
// all-reduces after a loop over a Fabric loader, and what
// fabric-divergent-exit must not mistake for a value every rank shares.
#pragma once

#include "rule-helpers/Accumulators.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/StmtCXX.h"

#include <vector>

namespace fabricize::metrics {

// Objects of the program's own (a running-mean meter, a vector of losses)
// the loop's body feeds through non-const member calls, declared before the
// loop for one pass of it and read after it: each rank's holds its shard's
// values only, and no edit can reduce what is inside them.
std::vector<const clang::VarDecl*> perRankObjectsOf(const clang::Stmt& loop, const clang::Stmt& functionBody,
                                                    clang::ASTContext& context);

// Data members of the function's class that the loop feeds with this rank's
// values and that are read outside it (after it, or in another member
// function): objects of the program's own fed through non-const calls
// given a per-rank value (`meter_.update(loss.item<double>())`,
// `losses_.push_back(...)`), and running totals of per-rank values that
// the function does not reset before the loop (memberRunningTotalsOf). No
// edit can make them whole: each rank's covers its shard.
std::vector<const clang::FieldDecl*> perRankMembersOf(const clang::Stmt& loop, const clang::FunctionDecl& function,
                                                      clang::ASTContext& context);

// `var` is all-reduced in its function: by hand, or by fabric-reduce-metric
// (a sum of a loop over a loader).
bool isReducedSum(const clang::VarDecl& var, clang::ASTContext& context);

// `e` is a value that differs between ranks: computed from this rank's
// batches or the model's outputs on them (`loss.item<double>()`, a
// prediction, a variable that holds one and is not all-reduced). A tensor
// the program read from a file or made itself, and any tensor's shape, are
// the same on every rank.
bool isPerRankValue(const clang::Expr& e, clang::ASTContext& context);

}  // namespace fabricize::metrics
