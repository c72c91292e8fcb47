#include "rule-helpers/Statements.h"

#include "rule-helpers/Types.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/StmtCXX.h"

namespace fabricize::statements {

using namespace clang;

bool isLoop(const Stmt& s) { return isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt>(s); }

const Stmt* loopBody(const Stmt& loop) {
  if (const auto* s = dyn_cast<ForStmt>(&loop)) return s->getBody();
  if (const auto* s = dyn_cast<WhileStmt>(&loop)) return s->getBody();
  if (const auto* s = dyn_cast<DoStmt>(&loop)) return s->getBody();
  if (const auto* s = dyn_cast<CXXForRangeStmt>(&loop)) return s->getBody();
  return nullptr;
}

bool isTensorType(QualType type) {
  const auto* record = type.getNonReferenceType()->getAsCXXRecordDecl();
  return record && (match::derivesFrom(*record, "at::Tensor") || match::derivesFrom(*record, "at::TensorBase"));
}

void forEach(const Stmt* s, const std::function<void(const Stmt&)>& visit, bool intoLambdas) {
  if (!s) return;
  if (const auto* lambda = dyn_cast<LambdaExpr>(s)) {
    if (intoLambdas) {
      visit(*s);
      forEach(lambda->getBody(), visit, intoLambdas);
    }
    return;
  }
  visit(*s);
  for (const Stmt* child : s->children()) forEach(child, visit, intoLambdas);
}

std::pair<const Expr*, const Expr*> assignmentSides(const Stmt& s) {
  if (const auto* op = dyn_cast<BinaryOperator>(&s); op && op->isAssignmentOp()) return {op->getLHS(), op->getRHS()};
  if (const auto* op = dyn_cast<CXXOperatorCallExpr>(&s); op && op->isAssignmentOp() && op->getNumArgs() == 2)
    return {op->getArg(0), op->getArg(1)};
  return {nullptr, nullptr};
}

bool callsAny(const Stmt* s, std::initializer_list<const char*> names) {
  bool found = false;
  forEach(
      s,
      [&](const Stmt& node) {
        const auto* call = dyn_cast<CallExpr>(&node);
        const FunctionDecl* callee = call ? call->getDirectCallee() : nullptr;
        if (!callee) return;
        std::string name = callee->getQualifiedNameAsString();
        for (const char* wanted : names) found = found || name == wanted;
      },
      /*intoLambdas=*/true);
  return found;
}

}  // namespace fabricize::statements
