// Values that differ between ranks once the data is split: computed from a
// rank's batches or the model's outputs on them. Below the data-loop
// analysis (DataLoops.h asks whether a skip's test is per rank) and the
// metrics (Metrics.h adds what fabric-reduce-metric all-reduces).
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"

#include <functional>

namespace fabricize::rankvalues {

// `e` is computed from this rank's batches or the model's outputs on them
// (`loss.item<double>()`, a prediction, a variable that holds one). A tensor
// the program read from a file or made itself, and any tensor's shape, are
// the same on every rank; so is a variable `madeAlike` says is all-reduced.
bool isPerRankValue(const clang::Expr& e, clang::ASTContext& context,
                    const std::function<bool(const clang::VarDecl&)>& madeAlike);

}  // namespace fabricize::rankvalues
