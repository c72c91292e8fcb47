// Sums a loop accumulates and reads afterwards: what fabric-reduce-metric
// all-reduces after a loop whose data is split across ranks. Below both the
// data-loop analysis (DataLoops.h: an evaluation loop is worth sharding when
// it sums something) and the metrics (Metrics.h).
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/Stmt.h"

#include <vector>

namespace fabricize::metrics {

// The variables the loop's body accumulates into (`+=`, `-=`, `++`, `--`)
// and never assigns outright, of arithmetic or tensor type, declared before
// the loop in a block that runs the loop once (no loop in between), read
// after the loop and not all-reduced there yet. In order of first use.
std::vector<const clang::VarDecl*> accumulatorsOf(const clang::Stmt& loop, const clang::Stmt& functionBody,
                                                  clang::ASTContext& context);

// `var = <fabric>.all_reduce(var, ...)`: a value already made the same on
// every rank (migrated code).
bool isReduction(const clang::Stmt& statement, const clang::VarDecl& var);

// `var` is declared in a block that runs `loop` once each time it runs (no
// loop in between): a value started afresh for each pass of the loop.
bool declaredForOnePass(const clang::VarDecl& var, const clang::Stmt& loop, clang::ASTContext& context);
// `var` is read after `loop` in the function body.
bool readAfter(const clang::VarDecl& var, const clang::Stmt& loop, const clang::Stmt& functionBody,
               clang::ASTContext& context);
// The local variable (not a parameter) `e` names, if any.
const clang::VarDecl* localVariable(const clang::Expr* e);

// --- Data members (a trainer's `seen_`, `total_loss_`) ----------------------
// The data member of `this` that `e` names (`seen_`, `this->seen_`), if any.
const clang::FieldDecl* thisMember(const clang::Expr* e);

// The data members of the function's class that the loop's body accumulates
// into as accumulatorsOf's sums (arithmetic or tensor, never assigned
// outright in the loop), that the function resets (`seen_ = 0;`) before the
// loop in a block that runs the loop once per reset, that are read outside
// the loop (after it, or in another member function: `fit()` dividing
// what `evaluate()` summed), and that are not all-reduced after it yet.
// Each pass starts afresh, so a reduce after the loop gives the sum over
// the whole data, as locals get.
std::vector<const clang::FieldDecl*> memberSumsOf(const clang::Stmt& loop, const clang::FunctionDecl& function,
                                                  clang::ASTContext& context);

// Every member the loop's body accumulates into (`+=`, `-=`, `++`, `--`,
// arithmetic or tensor, never assigned outright in it), whatever else holds.
std::vector<const clang::FieldDecl*> membersAccumulatedIn(const clang::Stmt& loop);

// The members the loop's body accumulates into (as above) that it never
// resets before the loop: running totals across calls, which a reduce after
// the loop would count again on the next call. Read outside the loop.
std::vector<const clang::FieldDecl*> memberRunningTotalsOf(const clang::Stmt& loop, const clang::FunctionDecl& function,
                                                           clang::ASTContext& context);

// `field` is read outside `loop`: after it in `function`, or in another
// member function of its class (one whose body this translation unit lacks
// counts as reading it). Assignments to it are not reads.
bool memberReadOutside(const clang::FieldDecl& field, const clang::Stmt& loop, const clang::FunctionDecl& function,
                       clang::ASTContext& context);

}  // namespace fabricize::metrics
