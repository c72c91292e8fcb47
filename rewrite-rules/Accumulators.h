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

}  // namespace fabricize::metrics
