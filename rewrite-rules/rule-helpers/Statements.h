// Small facts about statements that the analyses share (the data loops, the
// sums a loop accumulates, the metrics): what a loop's body is, whether a
// type is a tensor, every statement under one.
#pragma once

#include "clang/AST/Expr.h"
#include "clang/AST/Stmt.h"
#include "clang/AST/Type.h"

#include <functional>
#include <initializer_list>
#include <string>
#include <utility>

namespace fabricize::statements {

bool isLoop(const clang::Stmt& s);
// The body of a for, while, do or range-for loop; null for anything else.
const clang::Stmt* loopBody(const clang::Stmt& loop);
// at::Tensor or at::TensorBase, by value or reference.
bool isTensorType(clang::QualType type);

// `s` and every statement under it. A lambda's body is visited when
// `intoLambdas` (code that may run here) and skipped otherwise (what runs
// where the lambda is called).
void forEach(const clang::Stmt* s, const std::function<void(const clang::Stmt&)>& visit, bool intoLambdas);

// The two sides of an assignment, built-in or overloaded, plain or compound
// (`x = f()`, `t += loss`); {null, null} for anything else.
std::pair<const clang::Expr*, const clang::Expr*> assignmentSides(const clang::Stmt& s);

// Whether `s` calls a function named (qualified) one of `names`.
bool callsAny(const clang::Stmt* s, std::initializer_list<const char*> names);

}  // namespace fabricize::statements
