#include "rule-helpers/DataLoops.h"

#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "rule-helpers/Accumulators.h"
#include "rule-helpers/RankValues.h"
#include "rule-helpers/Statements.h"
#include "rule-helpers/Types.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/StmtCXX.h"
#include "clang/Index/USRGeneration.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/SmallString.h"

#include <functional>
#include <map>
#include <set>

namespace fabricize::dataloops {

using namespace clang;

namespace {

// --- Small pieces of the AST ---------------------------------------------------

using statements::isLoop;
const Stmt* bodyOf(const Stmt& loop) { return statements::loopBody(loop); }
// Every statement under `s`, a lambda's body included (it may run here).
void walk(const Stmt* s, const std::function<void(const Stmt&)>& visit) {
  statements::forEach(s, visit, /*intoLambdas=*/true);
}

const Expr* strip(const Expr* e) {
  while (e) {
    const Expr* next = e->IgnoreParenImpCasts();
    if (const auto* temporary = dyn_cast<MaterializeTemporaryExpr>(next)) next = temporary->getSubExpr();
    if (const auto* bind = dyn_cast<CXXBindTemporaryExpr>(next)) next = bind->getSubExpr();
    if (const auto* cleanups = dyn_cast<ExprWithCleanups>(next)) next = cleanups->getSubExpr();
    if (const auto* construct = dyn_cast<CXXConstructExpr>(next);
        construct && construct->getNumArgs() == 1 && construct->getConstructor()->isCopyOrMoveConstructor())
      next = construct->getArg(0);
    if (next == e) return e;
    e = next;
  }
  return e;
}

// The declaration an expression names: a variable, a parameter, a member
// (`this->x`, `obj.x`, `ptr->x`).
const ValueDecl* declOf(const Expr* e) {
  e = strip(e);
  if (!e) return nullptr;
  if (const auto* ref = dyn_cast<DeclRefExpr>(e)) return ref->getDecl();
  if (const auto* member = dyn_cast<MemberExpr>(e)) return member->getMemberDecl();
  if (const auto* op = dyn_cast<CXXOperatorCallExpr>(e);
      op && (op->getOperator() == OO_Star || op->getOperator() == OO_Arrow))
    return declOf(op->getArg(0));
  if (const auto* op = dyn_cast<UnaryOperator>(e); op && op->getOpcode() == UO_Deref) return declOf(op->getSubExpr());
  return nullptr;
}

// The object a member access or call is made on, down to a named one:
// `data.x` -> data, `this->dataset_.get(i)` -> dataset_.
const ValueDecl* baseDeclOf(const Expr* e) {
  for (int depth = 0; e && depth < 16; ++depth) {
    e = strip(e);
    if (const auto* ref = dyn_cast<DeclRefExpr>(e)) return ref->getDecl();
    if (const auto* member = dyn_cast<MemberExpr>(e)) {
      if (isa<CXXThisExpr>(strip(member->getBase()))) return member->getMemberDecl();
      e = member->getBase();
      continue;
    }
    if (const auto* call = dyn_cast<CXXMemberCallExpr>(e)) {
      e = call->getImplicitObjectArgument();
      continue;
    }
    if (const auto* op = dyn_cast<CXXOperatorCallExpr>(e); op && op->getNumArgs() >= 1) {
      e = op->getArg(0);
      continue;
    }
    if (const auto* op = dyn_cast<UnaryOperator>(e)) {
      e = op->getSubExpr();
      continue;
    }
    return nullptr;
  }
  return nullptr;
}

bool mentions(const Stmt* s, const std::set<const ValueDecl*>& decls) {
  bool found = false;
  walk(s, [&](const Stmt& node) {
    if (const auto* ref = dyn_cast<DeclRefExpr>(&node); ref && decls.count(ref->getDecl())) found = true;
    if (const auto* member = dyn_cast<MemberExpr>(&node); member && decls.count(member->getMemberDecl())) found = true;
  });
  return found;
}
bool mentions(const Stmt* s, const ValueDecl* decl) { return mentions(s, std::set<const ValueDecl*>{decl}); }

std::string textOf(SourceRange range, const ASTContext& context) {
  const SourceManager& sm = context.getSourceManager();
  CharSourceRange chars = Lexer::makeFileCharRange(CharSourceRange::getTokenRange(range), sm, context.getLangOpts());
  if (chars.isInvalid()) return "";
  return Lexer::getSourceText(chars, sm, context.getLangOpts()).str();
}
std::string textOf(const Stmt& s, const ASTContext& context) { return textOf(s.getSourceRange(), context); }

// An expression's text as a key: without blanks and `this->`, so
// `this->size` and `size`, `x_.size(0)` and `x_.size( 0 )` compare equal.
std::string keyOf(const Expr& e, const ASTContext& context) {
  std::string text = textOf(e, context), key;
  for (char c : text)
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') key += c;
  for (size_t at; (at = key.find("this->")) != std::string::npos;) key.erase(at, 6);
  while (key.size() > 2 && key.front() == '(' && key.back() == ')') key = key.substr(1, key.size() - 2);
  return key;
}

// `e` as an operand of a binary `+`/`-`: parenthesized unless it is one
// token or a call.
std::string operand(const Expr& e, const ASTContext& context) {
  std::string text = textOf(e, context);
  const Expr* s = e.IgnoreParenImpCasts();
  if (isa<DeclRefExpr, IntegerLiteral, MemberExpr, CallExpr, ParenExpr>(s) || isa<ParenExpr>(&e)) return text;
  return "(" + text + ")";
}

bool isTensor(QualType type) { return statements::isTensorType(type); }

// std::vector / std::deque / std::array (the containers shard_elements and
// an index vector take), or a C array.
bool isRandomAccessContainer(QualType type) {
  type = type.getNonReferenceType();
  if (type->isConstantArrayType()) return true;
  const auto* record = type->getAsCXXRecordDecl();
  if (!record) return false;
  std::string name = record->getQualifiedNameAsString();
  return name == "std::vector" || name == "std::deque" || name == "std::array";
}
QualType elementType(QualType type) {
  type = type.getNonReferenceType();
  if (const auto* array = dyn_cast<ConstantArrayType>(type.getCanonicalType())) return array->getElementType();
  const auto* spec = dyn_cast_or_null<ClassTemplateSpecializationDecl>(type->getAsCXXRecordDecl());
  if (!spec || spec->getTemplateArgs().size() == 0 || spec->getTemplateArgs()[0].getKind() != TemplateArgument::Type)
    return QualType();
  return spec->getTemplateArgs()[0].getAsType();
}
bool isIndexVector(QualType type) {
  const auto* record = type.getNonReferenceType()->getAsCXXRecordDecl();
  if (!record || record->getQualifiedNameAsString() != "std::vector") return false;
  QualType element = elementType(type);
  return !element.isNull() && element->isIntegerType() && !element->isBooleanType();
}

const FunctionDecl* calleeOf(const CallExpr& call) {
  const FunctionDecl* callee = call.getDirectCallee();
  return callee;
}
std::string qualifiedName(const FunctionDecl* f) { return f ? f->getQualifiedNameAsString() : ""; }

bool isLibTorchOrStd(const Decl& d) {
  for (const DeclContext* c = d.getDeclContext(); c; c = c->getParent())
    if (const auto* ns = dyn_cast<NamespaceDecl>(c))
      if (!ns->getParent() || ns->getParent()->isTranslationUnit()) {
        llvm::StringRef name = ns->getName();
        return name == "torch" || name == "at" || name == "c10" || name == "std" || name == "fabric";
      }
  return false;
}

// A function or method of the project's own, with its body in this
// translation unit.
const FunctionDecl* projectDefinition(const FunctionDecl* f, const ASTContext& context) {
  if (!f) return nullptr;
  const FunctionDecl* definition = f->getDefinition();
  if (!definition || !definition->getBody() || isLibTorchOrStd(*definition)) return nullptr;
  const SourceManager& sm = context.getSourceManager();
  if (sm.isInSystemHeader(sm.getExpansionLoc(definition->getLocation()))) return nullptr;
  return definition;
}

// Each function `s` calls (and the ones those call), to `depth`.
void forEachCalled(const Stmt* s, const ASTContext& context, int depth, std::set<const FunctionDecl*>& seen,
                   const std::function<void(const FunctionDecl&)>& visit) {
  if (depth <= 0) return;
  walk(s, [&](const Stmt& node) {
    const FunctionDecl* callee = nullptr;
    if (const auto* call = dyn_cast<CallExpr>(&node)) callee = projectDefinition(calleeOf(*call), context);
    if (const auto* construct = dyn_cast<CXXConstructExpr>(&node))
      callee = projectDefinition(construct->getConstructor(), context);
    if (!callee || !seen.insert(callee).second) return;
    visit(*callee);
    forEachCalled(callee->getBody(), context, depth - 1, seen, visit);
  });
}
void forEachCalledBody(const Stmt* s, const ASTContext& context, int depth, std::set<const FunctionDecl*>& seen,
                       const std::function<void(const Stmt&)>& visit) {
  forEachCalled(s, context, depth, seen, [&](const FunctionDecl& callee) { visit(*callee.getBody()); });
}

bool isBackwardCall(const Stmt& s) {
  if (const auto* call = dyn_cast<CXXMemberCallExpr>(&s)) {
    const CXXMethodDecl* method = call->getMethodDecl();
    if (!method || match::plainName(method) != "backward") return false;
    const CXXRecordDecl* record = method->getParent();
    return match::derivesFrom(*record, "at::Tensor") || match::derivesFrom(*record, "at::TensorBase") ||
           record->getQualifiedNameAsString() == "fabric::Fabric";
  }
  if (const auto* call = dyn_cast<CallExpr>(&s)) return qualifiedName(calleeOf(*call)) == "torch::autograd::backward";
  return false;
}

const FunctionDecl* functionOf(const Stmt& s, ASTContext& context) {
  return match::enclosingFunction(DynTypedNode::create(s), context);
}

const Stmt* parentStmt(const Stmt& s, ASTContext& context) {
  DynTypedNodeList parents = context.getParents(s);
  return parents.empty() ? nullptr : parents[0].get<Stmt>();
}

// The loops around `s` inside its function, innermost first.
std::vector<const Stmt*> enclosingLoops(const Stmt& s, ASTContext& context) {
  std::vector<const Stmt*> loops;
  DynTypedNode current = DynTypedNode::create(s);
  for (int depth = 0; depth < 256; ++depth) {
    DynTypedNodeList parents = context.getParents(current);
    if (parents.empty()) break;
    if (parents[0].get<FunctionDecl>() || parents[0].get<LambdaExpr>()) break;
    if (const Stmt* parent = parents[0].get<Stmt>(); parent && isLoop(*parent)) loops.push_back(parent);
    current = parents[0];
  }
  return loops;
}

bool contains(const Stmt& outer, const Stmt& inner, const SourceManager& sm) {
  SourceRange o = outer.getSourceRange(), i = inner.getSourceRange();
  return !sm.isBeforeInTranslationUnit(sm.getExpansionLoc(i.getBegin()), sm.getExpansionLoc(o.getBegin())) &&
         !sm.isBeforeInTranslationUnit(sm.getExpansionLoc(o.getEnd()), sm.getExpansionLoc(i.getEnd()));
}

// --- Writes -------------------------------------------------------------------

// Methods that change a container's contents or length.
bool isMutatingContainerMethod(llvm::StringRef name) {
  return name == "push_back" || name == "emplace_back" || name == "clear" || name == "resize" || name == "erase" ||
         name == "insert" || name == "pop_back" || name == "assign" || name == "swap" || name == "emplace" ||
         name == "push_front" || name == "pop_front";
}
// An in-place tensor method (`x.add_(...)`, `x.copy_(...)`), not a getter.
bool isInPlaceTensorMethod(llvm::StringRef name) { return name.ends_with("_") && !name.ends_with("__"); }

// Whether `s` changes `decl`: assigns it, increments it, or calls a
// mutating method on it.
bool writes(const Stmt& s, const ValueDecl* decl) {
  auto names = [&](const Expr* e) { return declOf(e) == decl || baseDeclOf(e) == decl; };
  if (const auto* op = dyn_cast<BinaryOperator>(&s)) return op->isAssignmentOp() && names(op->getLHS());
  if (const auto* op = dyn_cast<UnaryOperator>(&s)) return op->isIncrementDecrementOp() && names(op->getSubExpr());
  if (const auto* op = dyn_cast<CXXOperatorCallExpr>(&s)) {
    OverloadedOperatorKind kind = op->getOperator();
    bool assignment = kind == OO_Equal || kind == OO_PlusEqual || kind == OO_MinusEqual || kind == OO_StarEqual ||
                      kind == OO_SlashEqual || kind == OO_PlusPlus || kind == OO_MinusMinus;
    return assignment && op->getNumArgs() > 0 && names(op->getArg(0));
  }
  if (const auto* call = dyn_cast<CXXMemberCallExpr>(&s)) {
    const CXXMethodDecl* method = call->getMethodDecl();
    if (!method || declOf(call->getImplicitObjectArgument()) != decl) return false;
    llvm::StringRef name = match::plainName(method);
    return isMutatingContainerMethod(name) ||
           (isTensor(method->getThisType()->getPointeeType()) && isInPlaceTensorMethod(name));
  }
  if (const auto* call = dyn_cast<CallExpr>(&s)) {
    std::string name = qualifiedName(calleeOf(*call));
    if ((name == "std::shuffle" || name == "std::random_shuffle" || name == "std::iota" || name == "std::fill" ||
         name == "std::sort") &&
        call->getNumArgs() > 0)
      return baseDeclOf(call->getArg(0)) == decl;
  }
  return false;
}
bool writtenIn(const Stmt* s, const ValueDecl* decl) {
  bool written = false;
  walk(s, [&](const Stmt& node) { written = written || writes(node, decl); });
  return written;
}

// --- Random draws ---------------------------------------------------------------

// A call that draws from LibTorch's default generator and makes data:
// torch::randn, torch::randint, x.normal_(), torch::multinomial...
bool isTorchDraw(const Stmt& s) {
  static const std::set<std::string> functions = {
      "torch::rand",      "torch::randn",       "torch::randint",      "torch::randperm",
      "torch::rand_like", "torch::randn_like",  "torch::randint_like", "torch::normal",
      "torch::bernoulli", "torch::multinomial", "torch::poisson",      "at::rand",
      "at::randn",        "at::randint",        "at::randperm",        "at::normal",
      "at::bernoulli",    "at::multinomial",    "at::poisson",         "at::rand_like",
      "at::randn_like",   "at::randint_like"};
  if (const auto* call = dyn_cast<CXXMemberCallExpr>(&s)) {
    const CXXMethodDecl* method = call->getMethodDecl();
    if (!method || !isTensor(method->getThisType()->getPointeeType())) return false;
    llvm::StringRef name = match::plainName(method);
    return name == "normal_" || name == "uniform_" || name == "random_" || name == "bernoulli_" ||
           name == "exponential_" || name == "geometric_" || name == "cauchy_" || name == "log_normal_" ||
           name == "multinomial" || name == "bernoulli";
  }
  if (const auto* call = dyn_cast<CallExpr>(&s)) return functions.count(qualifiedName(calleeOf(*call))) > 0;
  return false;
}
bool isRandperm(const Stmt& s) {
  const auto* call = dyn_cast<CallExpr>(&s);
  if (!call || isa<CXXMemberCallExpr>(call)) return false;
  std::string name = qualifiedName(calleeOf(*call));
  return name == "torch::randperm" || name == "at::randperm";
}
bool isStdShuffle(const Stmt& s) {
  const auto* call = dyn_cast<CallExpr>(&s);
  return call && qualifiedName(calleeOf(*call)) == "std::shuffle" && call->getNumArgs() == 3;
}

// --- Data made before the loop ---------------------------------------------------

// What a sharded loop indexes: data every rank holds alike. A parameter, a
// global, a member, or a local declared before the loops around `loop`
// (this function's), none of which the loop or those loops rewrite; or a
// permutation drawn in those loops, which the migration makes rank 0's
// (`agreements`). `perRank` is set when the data is made inside those loops
// (each rank's own: an RL rollout).
bool isSharedData(const ValueDecl* decl, const Stmt& loop, ASTContext& context, std::vector<Agreement>& agreements,
                  bool* perRank = nullptr) {
  if (!decl) return false;
  const SourceManager& sm = context.getSourceManager();
  std::vector<const Stmt*> outer = enclosingLoops(loop, context);
  const Stmt* outermost = outer.empty() ? &loop : outer.back();
  auto declaredIn = [&](const Stmt& s) {
    SourceLocation at = sm.getExpansionLoc(decl->getLocation());
    SourceRange range = s.getSourceRange();
    return !sm.isBeforeInTranslationUnit(at, sm.getExpansionLoc(range.getBegin())) &&
           !sm.isBeforeInTranslationUnit(sm.getExpansionLoc(range.getEnd()), at);
  };
  std::vector<Agreement> found;
  const auto* var = dyn_cast<VarDecl>(decl);
  // A permutation drawn in `s`, or rows taken in the order of one drawn just
  // before (`Xs = X.index_select(0, perm)`, perm = torch::randperm(n)); no
  // other draw.
  auto permutationsIn = [&](const Stmt* s) {
    bool any = false, otherDraw = false;
    auto visit = [&](const Stmt& inner) {
      if (isRandperm(inner)) {
        any = true;
        found.push_back({cast<Expr>(&inner), false});
      } else if (isTorchDraw(inner)) {
        otherDraw = true;
      }
    };
    walk(s, [&](const Stmt& inner) {
      visit(inner);
      if (const auto* ref = dyn_cast<DeclRefExpr>(&inner))
        if (const auto* from = dyn_cast<VarDecl>(ref->getDecl());
            from && from != var && from->hasLocalStorage() && !isa<ParmVarDecl>(from) && from->getInit())
          walk(from->getInit(), [&](const Stmt& drawn) {
            if (isRandperm(drawn)) visit(drawn);
          });
    });
    return any && !otherDraw;
  };
  bool local = var && var->hasLocalStorage() && !isa<ParmVarDecl>(var);
  if (local && declaredIn(loop)) return false;  // made per iteration
  bool otherWrites = false;
  if (local && declaredIn(*outermost)) {
    // Made in the loops around: only a permutation drawn there is shared
    // (once the migration makes it rank 0's).
    if (!var->getInit() || !permutationsIn(var->getInit())) {
      if (perRank) *perRank = true;
      return false;
    }
  }
  if (writtenIn(bodyOf(loop), decl)) return false;
  // Written in the loops around it: fine only as a permutation drawn there
  // (`perm = torch::randperm(n)`, `std::shuffle(order...)`).
  auto permutationWrite = [&](const Stmt& s) {
    if (isStdShuffle(s)) {
      found.push_back({cast<Expr>(&s), true});
      return true;
    }
    const Expr* rhs = nullptr;
    if (const auto* op = dyn_cast<CXXOperatorCallExpr>(&s); op && op->getOperator() == OO_Equal) rhs = op->getArg(1);
    if (const auto* op = dyn_cast<BinaryOperator>(&s); op && op->getOpcode() == BO_Assign) rhs = op->getRHS();
    return rhs && permutationsIn(rhs);
  };
  for (const Stmt* around : outer)
    walk(bodyOf(*around), [&](const Stmt& s) {
      if (contains(loop, s, sm) || !writes(s, decl)) return;
      if (!permutationWrite(s)) otherWrites = true;
    });
  // Made once before those loops, in this function: what it writes there is
  // the same on every rank (a fill, a sort), except a permutation, which
  // becomes rank 0's (`std::shuffle(idx...)` at the top of a train_epoch(),
  // `auto perm = torch::randperm(n)`).
  if (const FunctionDecl* function = functionOf(loop, context); function && function->getBody()) {
    if (local && !declaredIn(*outermost) && var->getInit()) permutationsIn(var->getInit());
    walk(function->getBody(), [&](const Stmt& s) {
      if (contains(*outermost, s, sm) || !writes(s, decl) ||
          !sm.isBeforeInTranslationUnit(sm.getExpansionLoc(s.getBeginLoc()),
                                        sm.getExpansionLoc(outermost->getBeginLoc())))
        return;
      permutationWrite(s);
    });
  }
  if (otherWrites) {
    if (perRank) *perRank = true;
    return false;
  }
  for (const Agreement& a : found) {
    bool seen = false;
    for (const Agreement& u : agreements) seen = seen || u.call == a.call;
    if (!seen) agreements.push_back(a);
  }
  return true;
}

// --- Index loops ------------------------------------------------------------------

bool isOutputStatement(const Stmt& s) {
  bool output = false, other = false;
  walk(&s, [&](const Stmt& node) {
    if (const auto* op = dyn_cast<CXXOperatorCallExpr>(&node); op && op->getOperator() == OO_LessLess) {
      QualType type = op->getArg(0)->getType().getNonReferenceType();
      if (const auto* record = type->getAsCXXRecordDecl();
          record && (match::derivesFrom(*record, "std::basic_ostream") || record->getName().contains("stream")))
        output = true;
    }
    if (const auto* call = dyn_cast<CallExpr>(&node)) {
      std::string name = qualifiedName(calleeOf(*call));
      if (name == "printf" || name == "std::printf" || name == "fprintf" || name == "std::fprintf" || name == "puts")
        output = true;
      if (isBackwardCall(node)) other = true;
      if (const auto* member = dyn_cast<CXXMemberCallExpr>(&node))
        if (const CXXMethodDecl* method = member->getMethodDecl()) {
          llvm::StringRef n = match::plainName(method);
          if (n == "step" || n == "zero_grad" || n == "save" || n == "load" || n == "barrier" || n == "all_reduce")
            other = true;
        }
    }
    if (isa<BreakStmt, ContinueStmt, ReturnStmt, GotoStmt>(node)) other = true;
  });
  return output && !other;
}

// How the counter of an index loop is used: only to index data (and in
// output).
struct CounterUses {
  std::vector<const Expr*> accesses;  // the indexed objects
  std::string problem;                // the first use that is something else
  // Handed to a lambda that indexes data with it: positions the tool sees
  // read but does not split.
  bool intoLambda = false;
};

// Whether `call` (a lambda's call) hands argument `index` to a parameter
// the lambda indexes data with: `auto step = [&](int64_t i) { X.slice(0, i,
// i + bs) ... }; step(i);`.
bool lambdaIndexesWith(const CXXOperatorCallExpr& call, unsigned index) {
  const auto* record = call.getArg(0)->getType().getNonReferenceType()->getAsCXXRecordDecl();
  if (!record || !record->isLambda() || index == 0) return false;
  const CXXMethodDecl* body = record->getLambdaCallOperator();
  if (!body || !body->getBody() || index - 1 >= body->getNumParams()) return false;
  const ParmVarDecl* param = body->getParamDecl(index - 1);
  bool indexes = false;
  walk(body->getBody(), [&](const Stmt& s) {
    if (const auto* member = dyn_cast<CXXMemberCallExpr>(&s); member && member->getMethodDecl()) {
      llvm::StringRef name = match::plainName(member->getMethodDecl());
      if (name == "slice" || name == "narrow" || name == "index" || name == "index_select" || name == "select" ||
          name == "at" || name == "get")
        for (const Expr* arg : member->arguments()) indexes = indexes || mentions(arg, param);
    }
    if (const auto* op = dyn_cast<CXXOperatorCallExpr>(&s); op && op->getOperator() == OO_Subscript)
      indexes = indexes || (op->getNumArgs() == 2 && mentions(op->getArg(1), param));
  });
  return indexes;
}

// Walks up from a reference of the counter (or a local derived from it) to
// what uses it.
void classifyUse(const DeclRefExpr& ref, const Stmt& body, const std::set<const ValueDecl*>& derived,
                 ASTContext& context, CounterUses& uses) {
  const Stmt* child = &ref;
  for (int depth = 0; depth < 64; ++depth) {
    const Stmt* parent = parentStmt(*child, context);
    if (!parent) {
      // An initializer: its parent is the variable. A position or an index
      // made from the counter has its own uses checked; anything else (a
      // learning rate from the batch index) depends on the counter.
      DynTypedNodeList parents = context.getParents(*child);
      const auto* var = parents.empty() ? nullptr : parents[0].get<VarDecl>();
      if (var && !derived.count(var) && uses.problem.empty())
        uses.problem = "the counter initializes `" + var->getNameAsString() + "`";
      return;
    }

    if (const auto* call = dyn_cast<CXXMemberCallExpr>(parent)) {
      const CXXMethodDecl* method = call->getMethodDecl();
      const Expr* object = call->getImplicitObjectArgument();
      if (method && child != object && !isa<MemberExpr>(child)) {
        llvm::StringRef name = match::plainName(method);
        if (name == "slice" || name == "narrow" || name == "index" || name == "index_select" || name == "select" ||
            name == "at" || name == "get" || name == "getitem" || isTensor(object->getType()) ||
            isRandomAccessContainer(object->getType()) || !isLibTorchOrStd(*method)) {
          uses.accesses.push_back(object);
          return;
        }
      }
    }
    if (const auto* op = dyn_cast<CXXOperatorCallExpr>(parent)) {
      if (op->getOperator() == OO_Call)
        for (unsigned i = 1; i < op->getNumArgs(); ++i)
          if (op->getArg(i) == child && lambdaIndexesWith(*op, i)) {
            uses.intoLambda = true;
            if (uses.problem.empty())
              uses.problem = "the counter is handed to the lambda `" + textOf(*op->getArg(0), context) +
                             "`, which indexes data with it";
            return;
          }
      if (op->getOperator() == OO_Subscript && op->getNumArgs() == 2 && child == op->getArg(1)) {
        uses.accesses.push_back(op->getArg(0));
        return;
      }
      if (op->getOperator() == OO_LessLess) return;  // printed
      if (op->getOperator() == OO_Plus && op->getNumArgs() == 2) {
        // `v.begin() + i`: an iterator into the data.
        const Expr* other = child == op->getArg(0) ? op->getArg(1) : op->getArg(0);
        if (const auto* begin = dyn_cast<CXXMemberCallExpr>(strip(other));
            begin && begin->getMethodDecl() && match::plainName(begin->getMethodDecl()) == "begin") {
          uses.accesses.push_back(begin->getImplicitObjectArgument());
          return;
        }
      }
      if (op->isAssignmentOp() && op->getNumArgs() > 0 && child == op->getArg(0)) {
        if (uses.problem.empty()) uses.problem = "the loop writes the counter (`" + textOf(*parent, context) + "`)";
        return;
      }
    }
    if (const auto* subscript = dyn_cast<ArraySubscriptExpr>(parent); subscript && child == subscript->getIdx()) {
      uses.accesses.push_back(subscript->getBase());
      return;
    }
    if (const auto* call = dyn_cast<CallExpr>(parent);
        call && !isa<CXXMemberCallExpr>(call) && !isa<CXXOperatorCallExpr>(call)) {
      std::string name = qualifiedName(calleeOf(*call));
      if (name == "std::min" || name == "std::max" || name == "printf" || name == "std::printf") {
        if (name.find("printf") != std::string::npos) return;
        child = parent;
        continue;
      }
      // A function handed the data and the position: `get_batch(X, Y, i, bs)`.
      for (const Expr* argument : call->arguments())
        if (argument != child && (isTensor(argument->getType()) || isRandomAccessContainer(argument->getType()))) {
          uses.accesses.push_back(argument);
          return;
        }
      if (uses.problem.empty()) uses.problem = "the counter is passed to `" + name + "`";
      return;
    }
    if (const auto* op = dyn_cast<BinaryOperator>(parent)) {
      if (op->isAssignmentOp() && child == op->getLHS()) {
        if (uses.problem.empty()) uses.problem = "the loop writes the counter (`" + textOf(*parent, context) + "`)";
        return;
      }
      if (op->isAssignmentOp()) {
        // `start = i * bs;` into a derived local is fine, anything else is not.
        if (const ValueDecl* target = declOf(op->getLHS()); target && derived.count(target)) return;
        if (uses.problem.empty()) uses.problem = "the counter is stored (`" + textOf(*parent, context) + "`)";
        return;
      }
      if (op->getType()->isPointerType() || op->getLHS()->getType()->isPointerType() ||
          op->getRHS()->getType()->isPointerType()) {
        // `data_ptr + i`: a position in data.
        const Expr* other = child == op->getLHS() ? op->getRHS() : op->getLHS();
        if (other->getType()->isPointerType()) {
          uses.accesses.push_back(other);
          return;
        }
      }
    }
    // An inner loop over the batch's positions (`for (j = i; j < std::min(i
    // + bs, n); ++j)`): its bounds and its own step are fine.
    if (const auto* inner = dyn_cast<ForStmt>(parent);
        inner && (child == inner->getCond() || child == inner->getInc() || child == inner->getInit()))
      return;
    if (const auto* inner = dyn_cast<WhileStmt>(parent); inner && child == inner->getCond()) return;
    if (const auto* op = dyn_cast<UnaryOperator>(parent); op && op->isIncrementDecrementOp()) {
      if (const auto* inner = dyn_cast_or_null<ForStmt>(parentStmt(*op, context)); inner && inner->getInc() == op)
        return;
      if (uses.problem.empty()) uses.problem = "the loop writes the counter (`" + textOf(*parent, context) + "`)";
      return;
    }
    // A condition: fine when what it guards only prints.
    if (const auto* branch = dyn_cast<IfStmt>(parent); branch && child == branch->getCond()) {
      if (isOutputStatement(*branch->getThen()) && (!branch->getElse() || isOutputStatement(*branch->getElse())))
        return;
      if (uses.problem.empty())
        uses.problem = "the counter decides what the loop does (`if (" + textOf(*branch->getCond(), context) + ")`)";
      return;
    }
    if (isa<WhileStmt, DoStmt, ForStmt, SwitchStmt, ConditionalOperator>(parent) && !isa<Expr>(child)) {
      if (uses.problem.empty()) uses.problem = "the counter decides what the loop does";
      return;
    }
    if (const auto* conditional = dyn_cast<ConditionalOperator>(parent);
        conditional && child == conditional->getCond()) {
      // `i + bs < n ? i + bs : n` inside an index: go on up.
      child = parent;
      continue;
    }
    if (parent == &body || isa<CompoundStmt>(parent)) {
      if (uses.problem.empty()) uses.problem = "the counter is used in `" + textOf(*child, context) + "`";
      return;
    }
    child = parent;
  }
}

// `i < E`, `i <= E`, `i != E`, `i + c < E`, `i + c <= E` (and mirrored): the
// end of shard_range's values, as text. Empty when the condition is none of
// these.
std::string endOf(const Expr* condition, const VarDecl& counter, bool unitStep, const std::string& type,
                  ASTContext& context) {
  const auto* op = dyn_cast_or_null<BinaryOperator>(strip(condition));
  if (!op) return "";
  BinaryOperatorKind kind = op->getOpcode();
  const Expr *lhs = op->getLHS(), *rhs = op->getRHS();
  if (kind == BO_GT || kind == BO_GE) {  // `E > i` is `i < E`
    std::swap(lhs, rhs);
    kind = kind == BO_GT ? BO_LT : BO_LE;
  }
  if (kind != BO_LT && kind != BO_LE && kind != BO_NE) return "";
  if (kind == BO_NE && !unitStep) return "";
  if (mentions(rhs, &counter)) return "";
  const Expr* margin = nullptr;
  if (declOf(lhs) != &counter) {
    const auto* add = dyn_cast<BinaryOperator>(strip(lhs));
    if (!add || add->getOpcode() != BO_Add) return "";
    if (declOf(add->getLHS()) == &counter && !mentions(add->getRHS(), &counter))
      margin = add->getRHS();
    else if (declOf(add->getRHS()) == &counter && !mentions(add->getLHS(), &counter))
      margin = add->getLHS();
    else
      return "";
  }
  std::string end = operand(*rhs, context);
  if (!margin) return kind == BO_LE ? end + " + 1" : textOf(*rhs, context);
  std::string width = operand(*margin, context);
  bool isSigned = counter.getType()->isSignedIntegerType();
  if (kind == BO_LE) {
    // i + c <= E  <=>  i < E + 1 - c
    if (isSigned) return end + " + 1 - " + width;
    std::string limit = end + " + 1";
    return limit + " - std::min<" + type + ">(" + limit + ", " + width + ")";
  }
  if (isSigned) return end + " - " + width;
  return end + " - std::min<" + type + ">(" + end + ", " + width + ")";
}

bool tryIndexRange(const ForStmt& loop, ASTContext& context, LoopPlan& plan) {
  const auto* init = dyn_cast_or_null<DeclStmt>(loop.getInit());
  if (!init || !init->isSingleDecl()) return false;
  const auto* counter = dyn_cast<VarDecl>(init->getSingleDecl());
  if (!counter || !counter->getType()->isIntegerType() || !counter->getInit() || !loop.getCond() || !loop.getInc())
    return false;
  const Stmt* body = loop.getBody();
  // The step: ++i, i++, i += s, i = i + s.
  std::string step;
  const Expr* inc = strip(loop.getInc());
  if (const auto* unary = dyn_cast<UnaryOperator>(inc)) {
    if (!unary->isIncrementOp() || declOf(unary->getSubExpr()) != counter) return false;
  } else if (const auto* compound = dyn_cast<CompoundAssignOperator>(inc)) {
    if (compound->getOpcode() != BO_AddAssign || declOf(compound->getLHS()) != counter ||
        mentions(compound->getRHS(), counter))
      return false;
    step = textOf(*compound->getRHS(), context);
  } else if (const auto* assign = dyn_cast<BinaryOperator>(inc); assign && assign->getOpcode() == BO_Assign) {
    const auto* add = dyn_cast<BinaryOperator>(strip(assign->getRHS()));
    if (declOf(assign->getLHS()) != counter || !add || add->getOpcode() != BO_Add || declOf(add->getLHS()) != counter ||
        mentions(add->getRHS(), counter))
      return false;
    step = textOf(*add->getRHS(), context);
  } else {
    return false;
  }
  // The type as written (`int64_t`, `size_t`, `auto`).
  std::string type = counter->getTypeSourceInfo()
                         ? textOf(counter->getTypeSourceInfo()->getTypeLoc().getSourceRange(), context)
                         : counter->getType().getAsString();
  bool deduced = isa<AutoType>(counter->getType().getTypePtr()) || type == "auto";
  std::string valueType = deduced ? counter->getType().getAsString() : type;
  std::string end = endOf(loop.getCond(), *counter, step.empty(), valueType, context);
  if (end.empty()) {
    plan.kind = LoopPlan::NeedsPerson;
    plan.reason = "its condition `" + textOf(*loop.getCond(), context) +
                  "` is not a bound on the counter (`i < n`, `i + k <= n`)";
    return true;
  }
  // The bound and the step do not change while the loop runs.
  std::set<const ValueDecl*> bounds;
  walk(loop.getCond(), [&](const Stmt& s) {
    if (const auto* ref = dyn_cast<DeclRefExpr>(&s); ref && ref->getDecl() != counter) bounds.insert(ref->getDecl());
    if (const auto* member = dyn_cast<MemberExpr>(&s)) bounds.insert(member->getMemberDecl());
  });
  walk(loop.getInc(), [&](const Stmt& s) {
    if (const auto* ref = dyn_cast<DeclRefExpr>(&s); ref && ref->getDecl() != counter) bounds.insert(ref->getDecl());
  });
  for (const ValueDecl* bound : bounds)
    if (writtenIn(body, bound)) {
      plan.kind = LoopPlan::NeedsPerson;
      plan.reason = "the loop changes `" + bound->getNameAsString() + "`, which its bound or step reads";
      return true;
    }
  // Locals derived from the counter: positions (`start = b * bs`, `end =
  // std::min(start + bs, n)`), whose every use is checked, and index tensors
  // or lists (`idx = perm.slice(0, i, i + bs)`), whose uses as an index are.
  std::set<const ValueDecl*> positions{counter}, indexes;
  for (bool grew = true; grew;) {
    grew = false;
    walk(body, [&](const Stmt& s) {
      const auto* declaration = dyn_cast<DeclStmt>(&s);
      if (!declaration) return;
      for (const Decl* d : declaration->decls()) {
        const auto* var = dyn_cast<VarDecl>(d);
        if (!var || positions.count(var) || indexes.count(var) || !var->getInit() ||
            !mentions(var->getInit(), positions))
          continue;
        QualType type = var->getType();
        if (type->isIntegerType() || type->isPointerType()) {
          positions.insert(var);
          grew = true;
        } else if (isTensor(type) || isRandomAccessContainer(type)) {
          indexes.insert(var);
          grew = true;
        }
      }
    });
  }
  // Every use is looked at (a problem found first must not hide the data
  // the loop reads after it).
  CounterUses uses;
  walk(body, [&](const Stmt& s) {
    const auto* ref = dyn_cast<DeclRefExpr>(&s);
    if (!ref) return;
    if (positions.count(ref->getDecl())) {
      classifyUse(*ref, *body, positions, context, uses);
      return;
    }
    if (!indexes.count(ref->getDecl())) return;
    // An index tensor used to index data: that data must be shared too.
    const Stmt* parent = parentStmt(*ref, context);
    for (int depth = 0; parent && depth < 6; ++depth) {
      if (const auto* call = dyn_cast<CXXMemberCallExpr>(parent)) {
        const CXXMethodDecl* method = call->getMethodDecl();
        llvm::StringRef name = method ? match::plainName(method) : "";
        if (name == "index" || name == "index_select" || name == "at" || name == "take") {
          if (baseDeclOf(call->getImplicitObjectArgument()) != ref->getDecl())
            uses.accesses.push_back(call->getImplicitObjectArgument());
          return;
        }
      }
      if (const auto* op = dyn_cast<CXXOperatorCallExpr>(parent); op && op->getOperator() == OO_Subscript) {
        if (baseDeclOf(op->getArg(0)) != ref->getDecl()) uses.accesses.push_back(op->getArg(0));
        return;
      }
      if (isa<CompoundStmt>(parent)) return;
      parent = parentStmt(*parent, context);
    }
  });
  if (uses.intoLambda) {
    plan.kind = LoopPlan::NeedsPerson;
    plan.reason = uses.problem + ": the tool splits positions the loop's own body reads";
    return true;
  }
  if (!uses.problem.empty() || uses.accesses.empty()) {
    if (uses.accesses.empty()) return false;  // a step counter: not an index loop
    plan.kind = LoopPlan::NeedsPerson;
    plan.reason = uses.problem + ": after sharding it would hold this rank's positions, not a count of its steps";
    return true;
  }
  std::vector<Agreement> agreements;
  for (const Expr* access : uses.accesses) {
    const ValueDecl* data = baseDeclOf(access);
    if (data && (positions.count(data) || indexes.count(data))) continue;  // made from the counter, checked itself
    bool perRank = false;
    if (!isSharedData(data, loop, context, agreements, &perRank)) {
      plan.kind = LoopPlan::NeedsPerson;
      plan.perRankData = perRank;
      plan.reason = "it indexes `" + textOf(*access, context) +
                    "`, which the loops around it make anew: with no per-rank draws there, every rank makes the same "
                    "and trains on all of it";
      return true;
    }
  }
  plan.kind = LoopPlan::IndexRange;
  plan.headerOpen = loop.getLParenLoc();
  plan.headerClose = loop.getRParenLoc();
  std::string name = counter->getNameAsString();
  plan.counterDeclaration = type + " " + name;
  plan.rangeArguments = (deduced ? "" : "<" + type + ">") + "(" + textOf(*counter->getInit(), context) + ", " + end +
                        (step.empty() ? "" : ", " + step) + ")";
  plan.agreements = agreements;
  return true;
}

bool tryElements(const CXXForRangeStmt& loop, ASTContext& context, LoopPlan& plan) {
  const Expr* range = loop.getRangeInit();
  if (!range) return false;
  const Expr* stripped = strip(range);
  if (isa<InitListExpr, CXXStdInitializerListExpr>(stripped)) {
    plan.kind = LoopPlan::NotData;
    plan.reason = "it runs over a fixed list written in the code";
    return true;
  }
  if (stripped->isTypeDependent() || !isRandomAccessContainer(stripped->getType())) return false;
  std::vector<Agreement> agreements;
  const ValueDecl* data = baseDeclOf(stripped);
  // A parameter whose type is the template's (`template <class Batches>
  // fit(Batches& batches)`): another instantiation may hand a loader; the
  // one text serves all of them.
  if (const auto* param = dyn_cast_or_null<ParmVarDecl>(data))
    if (const auto* function = dyn_cast<FunctionDecl>(param->getDeclContext()))
      if (const FunctionDecl* pattern = function->getTemplateInstantiationPattern();
          pattern && param->getFunctionScopeIndex() < pattern->getNumParams() &&
          pattern->getParamDecl(param->getFunctionScopeIndex())->getType()->isDependentType()) {
        plan.kind = LoopPlan::NeedsPerson;
        plan.reason = "it runs over `" + textOf(*range, context) +
                      "`, whose type is a template argument (another instantiation may hand it a loader)";
        return true;
      }
  bool temporary = stripped->isPRValue() || isa<CallExpr>(stripped);
  bool perRank = false;
  if (!temporary && !isSharedData(data, loop, context, agreements, &perRank)) {
    plan.kind = LoopPlan::NeedsPerson;
    plan.perRankData = perRank;
    plan.reason = "it runs over `" + textOf(*range, context) +
                  "`, which the loops around it make anew: with no per-rank draws there, every rank makes the same "
                  "and trains on all of it";
    return true;
  }
  plan.kind = LoopPlan::Elements;
  plan.range = range;
  plan.agreements = agreements;
  return true;
}

// Whether the loop already splits its work by rank (by hand, or migrated).
bool drawsFromRankSeededEngine(const Stmt& loop, ASTContext& context);

// A variable named like a rank or a world size, not a constant written in
// the code (`const int rank = 4;` is a LoRA rank; `int rank = 0;` may be
// set by MPI_Comm_rank later).
bool isRankVariable(const ValueDecl& decl) {
  std::string name = llvm::StringRef(decl.getNameAsString()).lower();
  if (name != "rank" && name != "world_size" && name != "world" && name != "local_rank" && name != "global_rank" &&
      name != "num_replicas" && name != "nranks" && name != "num_ranks")
    return false;
  if (decl.getType()->isRecordType()) return false;
  if (const auto* var = dyn_cast<VarDecl>(&decl);
      var && !isa<ParmVarDecl>(var) && (var->isConstexpr() || var->getType().isConstQualified()) && var->getInit() &&
      var->getInit()->isIntegerConstantExpr(decl.getASTContext()))
    return false;
  return true;
}

// A rank used the way a loop splits its work by it: in the loop's header
// (`i = rank; i < n; i += world_size`), in arithmetic or a comparison
// (`i % world_size == rank`, `rank * n / world_size`), or as an index
// (`chunks[rank]`); not handed to a function as a plain argument.
bool splitsBy(const DeclRefExpr& ref, const Stmt& loop) {
  auto inside = [&](const Stmt* part) {
    bool found = false;
    walk(part, [&](const Stmt& s) { found = found || &s == &ref; });
    return found;
  };
  if (const auto* f = dyn_cast<ForStmt>(&loop);
      f && (inside(f->getInit()) || inside(f->getCond()) || inside(f->getInc())))
    return true;
  if (const auto* w = dyn_cast<WhileStmt>(&loop); w && inside(w->getCond())) return true;
  if (const auto* r = dyn_cast<CXXForRangeStmt>(&loop); r && inside(r->getRangeInit())) return true;
  bool used = false;
  walk(bodyOf(loop), [&](const Stmt& s) {
    if (used) return;
    if (const auto* op = dyn_cast<BinaryOperator>(&s);
        op && (op->isMultiplicativeOp() || op->isAdditiveOp() || op->isComparisonOp()))
      used = strip(op->getLHS()) == &ref || strip(op->getRHS()) == &ref;
    if (const auto* subscript = dyn_cast<ArraySubscriptExpr>(&s)) used = strip(subscript->getIdx()) == &ref;
    if (const auto* op = dyn_cast<CXXOperatorCallExpr>(&s); op && op->getOperator() == OO_Subscript)
      used = op->getNumArgs() == 2 && strip(op->getArg(1)) == &ref;
  });
  return used;
}

bool mentionsRank(const Stmt& loop) {
  bool found = false;
  walk(&loop, [&](const Stmt& s) {
    if (const auto* call = dyn_cast<CXXMemberCallExpr>(&s))
      if (const CXXMethodDecl* method = call->getMethodDecl()) {
        llvm::StringRef name = match::plainName(method);
        if ((name == "global_rank" || name == "world_size" || name == "local_rank" || name == "get_rank" ||
             name == "getRank" || name == "getSize" || name == "per_rank_random" || name == "shard") &&
            !isTensor(method->getThisType()->getPointeeType()))
          found = true;
      }
    if (const auto* call = dyn_cast<CallExpr>(&s)) {
      std::string name = qualifiedName(calleeOf(*call));
      if (name == "fabric::global_rank" || name == "fabric::world_size" || name == "fabric::shard") found = true;
      if (name == "getenv" || name == "std::getenv")
        for (const Expr* arg : call->arguments())
          if (const auto* text = dyn_cast<StringLiteral>(strip(arg)))
            found = found || text->getString().contains("RANK") || text->getString().contains("WORLD");
    }
    if (const auto* ref = dyn_cast<DeclRefExpr>(&s); ref && isRankVariable(*ref->getDecl()) && splitsBy(*ref, loop))
      found = true;
  });
  return found;
}

bool isFabricRangeType(QualType type) {
  const auto* record = type.getNonReferenceType()->getAsCXXRecordDecl();
  if (!record) return false;
  std::string name = record->getQualifiedNameAsString();
  return name.rfind("fabric::", 0) == 0;
}

bool readsLoaderIterator(const Stmt& loop, ASTContext& context) {
  using namespace ast_matchers;
  auto read = match::loaderIteratorRead();
  if (!ast_matchers::match(stmt(hasDescendant(read)), loop, context).empty()) return true;
  bool found = false;
  std::set<const FunctionDecl*> seen;
  forEachCalledBody(bodyOf(loop), context, 1, seen, [&](const Stmt& body) {
    if (!ast_matchers::match(stmt(hasDescendant(read)), body, context).empty()) found = true;
  });
  return found;
}

// The data a training loop reads whole each step (full-batch training):
// a tensor made before the loop passed to the model or the loss.
std::string wholeDataRead(const Stmt& loop, ASTContext& context) {
  std::string name;
  std::vector<Agreement> ignored;
  walk(bodyOf(loop), [&](const Stmt& s) {
    if (!name.empty()) return;
    const auto* ref = dyn_cast<DeclRefExpr>(&s);
    if (!ref || !isTensor(ref->getType())) return;
    const auto* var = dyn_cast<VarDecl>(ref->getDecl());
    if (!var || isa<ParmVarDecl>(var) || !var->hasLocalStorage()) return;
    const SourceManager& sm = context.getSourceManager();
    if (!sm.isBeforeInTranslationUnit(sm.getExpansionLoc(var->getLocation()), sm.getExpansionLoc(loop.getBeginLoc())))
      return;
    if (isSharedData(var, loop, context, ignored)) name = var->getNameAsString();
  });
  return name;
}

// A module's forward: `model->forward(x)`, `model(x)`, through a call of
// the project's (an evaluate_batch()).
bool isModuleCall(const Stmt& s) {
  if (const auto* call = dyn_cast<CXXMemberCallExpr>(&s)) {
    const CXXMethodDecl* method = call->getMethodDecl();
    return method && match::plainName(method) == "forward" &&
           match::derivesFrom(*method->getParent(), "torch::nn::Module");
  }
  if (const auto* call = dyn_cast<CXXOperatorCallExpr>(&s); call && call->getOperator() == OO_Call)
    return match::isModuleType(call->getArg(0)->getType());
  return false;
}
// The loop's body, or a function it calls (two levels deep), holds a
// statement that passes `test`.
bool loopOrItsCallsHave(const Stmt& loop, ASTContext& context, bool (*test)(const Stmt&)) {
  bool found = false;
  walk(bodyOf(loop), [&](const Stmt& s) { found = found || test(s); });
  if (found) return true;
  std::set<const FunctionDecl*> seen;
  forEachCalledBody(bodyOf(loop), context, 2, seen,
                    [&](const Stmt& body) { walk(&body, [&](const Stmt& s) { found = found || test(s); }); });
  return found;
}
bool runsModel(const Stmt& loop, ASTContext& context) { return loopOrItsCallsHave(loop, context, isModuleCall); }

// --- Whether every rank runs the loop's passes alike -----------------------------

// `s` ends the loop's pass early: a `continue`, `break`, `return` or `goto`
// that leaves it (not a `break` of a loop or switch inside, nor a lambda's
// `return`).
bool leavesPass(const Stmt* s) {
  if (!s || isa<LambdaExpr>(s)) return false;
  if (isa<ContinueStmt, BreakStmt, ReturnStmt, GotoStmt>(s)) return true;
  if (isLoop(*s) || isa<SwitchStmt>(s)) {
    bool leaves = false;
    statements::forEach(
        s, [&](const Stmt& n) { leaves = leaves || isa<ReturnStmt, GotoStmt>(n); }, /*intoLambdas=*/false);
    return leaves;
  }
  for (const Stmt* child : s->children())
    if (leavesPass(child)) return true;
  return false;
}

// Variables declared in the loop: its counter or element, and its body's
// locals (a structured binding's names included).
std::set<const ValueDecl*> localsOf(const Stmt& loop) {
  std::set<const ValueDecl*> locals;
  walk(&loop, [&](const Stmt& s) {
    if (const auto* declaration = dyn_cast<DeclStmt>(&s))
      for (const Decl* d : declaration->decls()) {
        if (const auto* var = dyn_cast<VarDecl>(d)) locals.insert(var);
        if (const auto* decomposition = dyn_cast<DecompositionDecl>(d))
          for (const BindingDecl* binding : decomposition->bindings()) locals.insert(binding);
      }
  });
  return locals;
}

// Computed from this rank's batches or outputs; a variable the function
// all-reduces by hand is the same on every rank.
bool perRankValue(const Expr& e, ASTContext& context) {
  return rankvalues::isPerRankValue(e, context, [&](const VarDecl& var) {
    const FunctionDecl* function = match::enclosingFunction(DynTypedNode::create(var), context);
    bool reduced = false;
    if (function && function->getBody())
      walk(function->getBody(), [&](const Stmt& s) { reduced = reduced || metrics::isReduction(s, var); });
    return reduced;
  });
}

// A pass skipped or the loop left on a test of the pass's own batch (`if
// (x.size(0) < bs) continue;`): once the data is split, the ranks' batches
// differ, and one rank would skip a backward pass the others run. A test on
// a loss or an output is fabric-divergent-exit's finding, not this.
const IfStmt* skipsOnItsBatch(const Stmt& loop, ASTContext& context) {
  std::set<const ValueDecl*> locals = localsOf(loop);
  const IfStmt* found = nullptr;
  statements::forEach(
      bodyOf(loop),
      [&](const Stmt& s) {
        const auto* branch = dyn_cast<IfStmt>(&s);
        if (found || !branch || !branch->getCond() || !mentions(branch->getCond(), locals)) return;
        if (perRankValue(*branch->getCond(), context)) return;
        if (leavesPass(branch->getThen()) || leavesPass(branch->getElse())) found = branch;
      },
      /*intoLambdas=*/false);
  return found;
}

// Whether `s` calls a function or method of the project's, or a lambda.
bool callsProjectCode(const Stmt* s, ASTContext& context) {
  bool found = false;
  walk(s, [&](const Stmt& node) {
    const auto* call = dyn_cast<CallExpr>(&node);
    if (!call || found) return;
    const FunctionDecl* callee = calleeOf(*call);
    if (const auto* method = dyn_cast_or_null<CXXMethodDecl>(callee); method && method->getParent()->isLambda())
      found = true;
    else if (callee && !isLibTorchOrStd(*callee) && !isModuleCall(node) &&
             !context.getSourceManager().isInSystemHeader(
                 context.getSourceManager().getExpansionLoc(callee->getLocation())))
      found = true;
  });
  return found;
}

// A loop that ends on what happens in it: a `while (!done)` whose flag an
// environment's step sets, a `while (!env.finished())`, a `break` on such a
// flag: run on each rank's own data (an episode each), its passes differ in
// number between ranks. A counter or a bound every rank shares does not
// (`while (step < max_steps)`), and a test on a loss is
// fabric-divergent-exit's finding.
bool endsOnItsOwnData(const Stmt& loop, ASTContext& context) {
  const Expr* condition = nullptr;
  if (const auto* w = dyn_cast<WhileStmt>(&loop)) condition = w->getCond();
  if (const auto* d = dyn_cast<DoStmt>(&loop)) condition = d->getCond();
  // What the pass computes from a call: `done = env.step(a)`, `bool done =
  // step(...)`, `auto [obs, r, done] = env.step(a)`, `env.step(a, done)`.
  std::set<const ValueDecl*> fromCalls;
  walk(bodyOf(loop), [&](const Stmt& s) {
    if (const auto* declaration = dyn_cast<DeclStmt>(&s))
      for (const Decl* d : declaration->decls())
        if (const auto* var = dyn_cast<VarDecl>(d); var && var->getInit() && isa<CallExpr>(strip(var->getInit()))) {
          fromCalls.insert(var);
          if (const auto* decomposition = dyn_cast<DecompositionDecl>(var))
            for (const BindingDecl* binding : decomposition->bindings()) fromCalls.insert(binding);
        }
    auto [lhs, rhs] = statements::assignmentSides(s);
    if (lhs && isa_and_nonnull<CallExpr>(strip(rhs)))
      if (const ValueDecl* target = declOf(lhs)) fromCalls.insert(target);
    // Set through a non-const reference parameter.
    if (const auto* call = dyn_cast<CallExpr>(&s); call && !isa<CXXOperatorCallExpr>(call))
      if (const FunctionDecl* callee = calleeOf(*call))
        for (unsigned i = 0; i < call->getNumArgs() && i < callee->getNumParams(); ++i) {
          QualType param = callee->getParamDecl(i)->getType();
          if (!param->isReferenceType() || param.getNonReferenceType().isConstQualified()) continue;
          const Expr* arg = strip(call->getArg(i));
          if (const auto* ref = dyn_cast<DeclRefExpr>(arg); ref && !ref->getType()->isRecordType())
            fromCalls.insert(ref->getDecl());
        }
  });
  // A training loop left on a loss or an output is fabric-divergent-exit's
  // finding; a play loop (no backward) ends on its outputs as on its data.
  bool training = runsBackward(loop, context);
  auto endsOnData = [&](const Expr* test) {
    if (!test || (training && perRankValue(*test, context))) return false;
    return mentions(test, fromCalls) || (!isa<ForStmt>(loop) && test == condition && callsProjectCode(test, context));
  };
  if (endsOnData(condition)) return true;
  bool early = false;
  statements::forEach(
      bodyOf(loop),
      [&](const Stmt& s) {
        if (const auto* branch = dyn_cast<IfStmt>(&s);
            branch && (endsOnData(branch->getCond()) || callsProjectCode(branch->getCond(), context)) &&
            !(training && perRankValue(*branch->getCond(), context)))
          early = early || leavesPass(branch->getThen()) || leavesPass(branch->getElse());
      },
      /*intoLambdas=*/false);
  return early;
}

// Why the number of the loop's passes may differ between ranks once each
// plays its own data: the loop ends on its own data, or its bound is the
// length of a list filled in a loop that does (an RL rollout played to its
// end) or filled on a test. Empty when every rank runs as many passes.
std::string differingPassCount(const Stmt& loop, ASTContext& context) {
  if (!isa<ForStmt, CXXForRangeStmt>(loop) && endsOnItsOwnData(loop, context)) {
    const Expr* condition = isa<WhileStmt>(loop) ? cast<WhileStmt>(loop).getCond() : cast<DoStmt>(loop).getCond();
    return "it runs until what it plays ends (`" + textOf(*condition, context) + "`)";
  }
  const Stmt* bound = nullptr;
  if (const auto* f = dyn_cast<ForStmt>(&loop)) bound = f->getCond();
  if (const auto* r = dyn_cast<CXXForRangeStmt>(&loop)) bound = r->getRangeInit();
  if (!bound) return "";
  const FunctionDecl* function = functionOf(loop, context);
  if (!function || !function->getBody()) return "";
  const SourceManager& sm = context.getSourceManager();
  std::set<const ValueDecl*> lists;
  walk(bound, [&](const Stmt& s) {
    if (const auto* var = dyn_cast_or_null<VarDecl>(baseDeclOf(dyn_cast<Expr>(&s)));
        var && var->hasLocalStorage() && !isa<ParmVarDecl>(var))
      lists.insert(var);
  });
  for (const ValueDecl* list : lists) {
    bool differs = false;
    walk(function->getBody(), [&](const Stmt& s) {
      if (differs || contains(loop, s, sm) || !writes(s, list)) return;
      const auto* call = dyn_cast<CXXMemberCallExpr>(&s);
      if (!call || !call->getMethodDecl() || !isMutatingContainerMethod(match::plainName(call->getMethodDecl())))
        return;
      // The loops around the write, up to the one that holds `loop` too.
      DynTypedNode current = DynTypedNode::create(s);
      for (int depth = 0; depth < 256 && !differs; ++depth) {
        DynTypedNodeList parents = context.getParents(current);
        if (parents.empty() || parents[0].get<FunctionDecl>() || parents[0].get<LambdaExpr>()) break;
        const Stmt* parent = parents[0].get<Stmt>();
        if (parent && contains(*parent, loop, sm)) break;
        if (parent && (isa<IfStmt>(parent) || isa<ConditionalOperator>(parent))) differs = true;
        if (parent && isLoop(*parent) && endsOnItsOwnData(*parent, context)) differs = true;
        current = parents[0];
      }
    });
    if (differs)
      return "its bound (`" + textOf(*bound, context) + "`) is the length of `" + list->getNameAsString() +
             "`, which each rank fills from its own play, to its own end";
  }
  return "";
}

// A summed loss read by a backward pass after the loop: `total.backward()`,
// `fabric.backward(total / n)`, through locals made from it.
bool feedsBackwardAfter(const VarDecl& sum, const Stmt& loop, const Stmt& functionBody, ASTContext& context) {
  if (!isTensor(sum.getType())) return false;
  const SourceManager& sm = context.getSourceManager();
  auto after = [&](const Stmt& s) {
    return sm.isBeforeInTranslationUnit(sm.getExpansionLoc(loop.getEndLoc()), sm.getExpansionLoc(s.getBeginLoc()));
  };
  std::set<const ValueDecl*> flows{&sum};
  for (bool grew = true; grew;) {
    grew = false;
    walk(&functionBody, [&](const Stmt& s) {
      if (!after(s)) return;
      if (const auto* declaration = dyn_cast<DeclStmt>(&s))
        for (const Decl* d : declaration->decls())
          if (const auto* var = dyn_cast<VarDecl>(d);
              var && !flows.count(var) && var->getInit() && mentions(var->getInit(), flows)) {
            flows.insert(var);
            grew = true;
          }
      auto [lhs, rhs] = statements::assignmentSides(s);
      if (lhs && mentions(rhs, flows))
        if (const ValueDecl* target = declOf(lhs); target && flows.insert(target).second) grew = true;
    });
  }
  bool found = false;
  walk(&functionBody, [&](const Stmt& s) { found = found || (after(s) && isBackwardCall(s) && mentions(&s, flows)); });
  return found;
}

// The class of the object a call is made on: `loader.next()`,
// `loader->next()`, `(*it)(batch)`, through std::unique_ptr / shared_ptr.
const CXXRecordDecl* objectClass(const Expr* object) {
  if (!object) return nullptr;
  QualType type = object->getType().getNonReferenceType();
  if (type->isPointerType()) type = type->getPointeeType();
  const CXXRecordDecl* record = type->getAsCXXRecordDecl();
  if (const Type* held = match::heldBy(type, "std::unique_ptr")) record = held->getAsCXXRecordDecl();
  if (const Type* held = match::heldBy(type, "std::shared_ptr")) record = held->getAsCXXRecordDecl();
  return record && record->hasDefinition() ? record->getDefinition() : nullptr;
}

// The calls in `s` made on an object of `record`.
std::vector<const CallExpr*> callsOn(const Stmt* s, const CXXRecordDecl& record) {
  std::vector<const CallExpr*> calls;
  walk(s, [&](const Stmt& node) {
    const Expr* object = nullptr;
    if (const auto* call = dyn_cast<CXXMemberCallExpr>(&node)) object = call->getImplicitObjectArgument();
    if (const auto* call = dyn_cast<CXXOperatorCallExpr>(&node); call && call->getOperator() == OO_Call)
      object = call->getArg(0);
    if (object && objectClass(object) == &record) calls.push_back(cast<CallExpr>(&node));
  });
  return calls;
}

// A call of a loader class's method that reads its order member (which holds
// the share once the class is sharded: `num_batches()`, `size()`); `unseen`
// for a method whose code is elsewhere.
bool readsOrder(const CallExpr& call, const LoaderClassPlan& classPlan, bool unseen) {
  const FunctionDecl* callee = calleeOf(call);
  const FunctionDecl* body = callee ? callee->getDefinition() : nullptr;
  if (!body || !body->getBody() || classPlan.member.empty()) return unseen;
  bool reads = false;
  walk(body->getBody(), [&](const Stmt& s) {
    if (const auto* member = dyn_cast<MemberExpr>(&s))
      reads = reads || member->getMemberDecl()->getNameAsString() == classPlan.member;
  });
  return reads;
}

// Whether a loop over a loader class's batches stops when this rank's share
// runs out: it asks the loader in its condition (`while (loader(batch))`,
// `while (it.has_next())`), leaves when the loader says so (`if
// (!loader.next(b)) break;`), iterates it (`for (auto& b : loader)`), or
// counts its passes with a method that measures the order (which holds the
// share once the class is sharded: `b < loader.num_batches()`). A loop that
// counts its own passes (`s < steps`, steps from the data set's size) would
// ask for more batches than the share has.
bool endsThroughLoader(const Stmt& loop, const CXXRecordDecl& record, const LoaderClassPlan& classPlan,
                       ASTContext& context) {
  if (isa<CXXForRangeStmt>(loop)) return true;
  const CXXRecordDecl* definition = record.getDefinition() ? record.getDefinition() : &record;
  // A method whose result follows the share, or one whose code is elsewhere
  // (the class decides there).
  auto measuresShare = [&](const CallExpr& call) { return readsOrder(call, classPlan, /*unseen=*/true); };
  const Expr* condition = nullptr;
  if (const auto* w = dyn_cast<WhileStmt>(&loop)) condition = w->getCond();
  if (const auto* d = dyn_cast<DoStmt>(&loop)) condition = d->getCond();
  if (const auto* f = dyn_cast<ForStmt>(&loop)) condition = f->getCond();
  if (condition) {
    std::vector<const CallExpr*> asked = callsOn(condition, *definition);
    if (!asked.empty()) {
      if (!isa<ForStmt>(loop)) return true;
      for (const CallExpr* call : asked)
        if (measuresShare(*call)) return true;
    }
    // `s < steps`, steps = loader.num_batches().
    std::set<const ValueDecl*> tested;
    walk(condition, [&](const Stmt& s) {
      if (const ValueDecl* d = declOf(dyn_cast<Expr>(&s))) tested.insert(d);
    });
    for (const ValueDecl* d : tested)
      if (const auto* var = dyn_cast<VarDecl>(d); var && var->getInit())
        for (const CallExpr* call : callsOn(var->getInit(), *definition))
          if (measuresShare(*call)) return true;
  }
  // `if (!loader.next(batch)) break;`, `auto b = loader.next(); if (!b) break;`.
  std::set<const ValueDecl*> fromLoader;
  walk(bodyOf(loop), [&](const Stmt& s) {
    if (const auto* declaration = dyn_cast<DeclStmt>(&s))
      for (const Decl* d : declaration->decls())
        if (const auto* var = dyn_cast<VarDecl>(d);
            var && var->getInit() && !callsOn(var->getInit(), *definition).empty())
          fromLoader.insert(var);
  });
  bool leaves = false;
  statements::forEach(
      bodyOf(loop),
      [&](const Stmt& s) {
        const auto* branch = dyn_cast<IfStmt>(&s);
        if (!branch || !branch->getCond()) return;
        bool asks = !callsOn(branch->getCond(), *definition).empty() || mentions(branch->getCond(), fromLoader);
        if (asks && (leavesPass(branch->getThen()) || leavesPass(branch->getElse()))) leaves = true;
      },
      /*intoLambdas=*/false);
  return leaves;
}

struct PlanCache {
  const ASTContext* context = nullptr;
  std::map<const Stmt*, LoopPlan> plans;
  std::map<const CXXRecordDecl*, LoaderClassPlan> classes;
};
thread_local PlanCache cache;
PlanCache& cacheFor(const ASTContext& context) {
  if (cache.context != &context) {
    cache.plans.clear();
    cache.classes.clear();
    cache.context = &context;
  }
  return cache;
}

}  // namespace

std::vector<const CallExpr*> shareMeasures(const Stmt* s, const CXXRecordDecl& loaderClass, ASTContext& context) {
  const CXXRecordDecl* definition = loaderClass.getDefinition() ? loaderClass.getDefinition() : &loaderClass;
  const LoaderClassPlan& plan = loaderClassPlan(*definition, context);
  std::vector<const CallExpr*> out;
  if (!plan.clear || plan.randomSampler) return out;
  for (const CallExpr* call : callsOn(s, *definition))
    if (readsOrder(*call, plan, /*unseen=*/false)) out.push_back(call);
  return out;
}

void forgetTranslationUnit() {
  cache.plans.clear();
  cache.classes.clear();
  cache.context = nullptr;
}

bool runsBackward(const Stmt& loop, ASTContext& context) { return loopOrItsCallsHave(loop, context, isBackwardCall); }

bool isInnermostTrainingLoop(const Stmt& loop, ASTContext& context) {
  if (!isLoop(loop) || !runsBackward(loop, context)) return false;
  bool inner = false;
  auto visit = [&](const Stmt& s) {
    if (!inner && &s != &loop && isLoop(s) && runsBackward(s, context)) inner = true;
  };
  walk(bodyOf(loop), visit);
  // A loop over epochs that calls train_epoch(), whose own loop trains.
  std::set<const FunctionDecl*> seen;
  forEachCalledBody(bodyOf(loop), context, 2, seen, [&](const Stmt& body) { walk(&body, visit); });
  return !inner;
}

bool isShardedPlan(const LoopPlan& plan) {
  return plan.kind == LoopPlan::FabricLoader || plan.kind == LoopPlan::IndexRange || plan.kind == LoopPlan::Elements ||
         plan.kind == LoopPlan::OwnLoader;
}

namespace {

// A split training loop that skips a pass on its batch: NeedsPerson
// (skipsOnItsBatch).
void checkSkips(const Stmt& loop, ASTContext& context, LoopPlan& plan) {
  if (!plan.training || (plan.kind != LoopPlan::IndexRange && plan.kind != LoopPlan::Elements)) return;
  const IfStmt* skip = skipsOnItsBatch(loop, context);
  if (!skip) return;
  plan.kind = LoopPlan::NeedsPerson;
  plan.agreements.clear();
  plan.reason = "it skips or ends a pass on a test of its batch (`if (" + textOf(*skip->getCond(), context) +
                ")`): with the data split the ranks' batches differ, and one rank would skip a backward pass the "
                "others run (they would wait for it)";
  plan.edit =
      "Decide it from what every rank shares before splitting the loop (drop a last partial batch through the "
      "loop's bound: `fabric.shard_range<int64_t>(0, n - n % bs, bs)`), then split it with fabric.shard_range / "
      "fabric.shard_elements.";
}

// `int64_t i = 0; while (i < n) { ... X.slice(0, i, i + bs) ...; i += bs; }`:
// positions counted by hand. The tool rewrites a for loop's header only;
// a person writes this one as one.
bool tryWhileCounter(const Stmt& loop, ASTContext& context, LoopPlan& plan) {
  const auto* w = dyn_cast<WhileStmt>(&loop);
  const auto* test = w ? dyn_cast_or_null<BinaryOperator>(strip(w->getCond())) : nullptr;
  if (!test || (test->getOpcode() != BO_LT && test->getOpcode() != BO_LE && test->getOpcode() != BO_NE)) return false;
  const auto* counter = dyn_cast_or_null<VarDecl>(declOf(test->getLHS()));
  if (!counter || !counter->getType()->isIntegerType() || !counter->hasLocalStorage()) return false;
  const Stmt* advance = nullptr;
  for (const Stmt* statement : w->getBody()->children())
    if (statement && writes(*statement, counter)) advance = statement;
  if (!advance) return false;
  CounterUses uses;
  const std::set<const ValueDecl*> positions{counter};
  const SourceManager& sm = context.getSourceManager();
  walk(w->getBody(), [&](const Stmt& s) {
    if (const auto* ref = dyn_cast<DeclRefExpr>(&s); ref && ref->getDecl() == counter && !contains(*advance, s, sm))
      classifyUse(*ref, *w->getBody(), positions, context, uses);
  });
  if (uses.accesses.empty()) return false;  // a step counter
  std::string name = counter->getNameAsString();
  std::string type = counter->getType().getUnqualifiedType().getAsString(context.getPrintingPolicy());
  plan.kind = LoopPlan::NeedsPerson;
  plan.reason = "it advances its position `" + name + "` by hand (`" + textOf(*advance, context) +
                "`), and the tool splits the positions of a for loop's header only";
  plan.edit = "Write it as a for loop over this rank's positions: `for (" + type + " " + name +
              " : fabric.shard_range<" + type + ">(<first>, " + textOf(*test->getRHS(), context) +
              ", <step>))`, without the `" + textOf(*advance, context) + "`.";
  return true;
}

// What `loop` reads per iteration, if it reads data: a loader, positions,
// elements, a loader class of the project's own (or it is split already).
// False when it reads none of these (a step counter, a micro-batch loop).
bool classifyData(const Stmt& loop, ASTContext& context, LoopPlan& plan) {
  if (const auto* range = dyn_cast<CXXForRangeStmt>(&loop)) {
    QualType type = strip(range->getRangeInit())->getType();
    if (!ast_matchers::match(match::loaderLoop(), loop, context).empty()) {
      plan.kind = LoopPlan::FabricLoader;
      return true;
    }
    if (isFabricRangeType(type)) {
      plan.kind = LoopPlan::AlreadySharded;
      return true;
    }
  }
  if (mentionsRank(loop) || (plan.training && drawsFromRankSeededEngine(loop, context))) {
    plan.kind = LoopPlan::AlreadySharded;
    return true;
  }
  if (readsLoaderIterator(loop, context)) {
    plan.kind = LoopPlan::FabricLoader;
    return true;
  }
  if (const auto* forLoop = dyn_cast<ForStmt>(&loop); forLoop && tryIndexRange(*forLoop, context, plan)) {
    if (plan.kind == LoopPlan::NeedsPerson)
      plan.edit =
          "Give each rank its part of the loop: `for (<counter> : fabric.shard_range<T>(<first>, <end>, "
          "<step>))` (this rank's values, strided, the same count on every rank), and keep anything else "
          "the counter decides on a counter of its own.";
    checkSkips(loop, context, plan);
    return true;
  }
  if (const auto* range = dyn_cast<CXXForRangeStmt>(&loop); range && tryElements(*range, context, plan)) {
    if (plan.kind == LoopPlan::NeedsPerson)
      plan.edit =
          "Split data every rank holds alike with `fabric.shard_elements(container)` where it is iterated "
          "(for a template, where the container is known), or draw per-rank data in the loops around it.";
    if (plan.kind == LoopPlan::NotData) return false;
    checkSkips(loop, context, plan);
    return true;
  }
  if (tryWhileCounter(loop, context, plan)) return true;
  if (const CXXRecordDecl* loader = ownLoaderClassOf(loop, context)) {
    const LoaderClassPlan& classPlan = loaderClassPlan(*loader, context);
    // A class whose code is here but walks no order the tool follows (an
    // environment, a data set read at random): not a loader; the loop's
    // draws or a person decide.
    if (!classPlan.where.isValid() && classPlan.seenHere) return false;
    plan.kind = LoopPlan::OwnLoader;
    plan.loaderClass = loader;
    if (classPlan.where.isValid() && !classPlan.clear && !classPlan.sharded) {
      plan.kind = LoopPlan::NeedsPerson;
      plan.reason = "it reads its batches from `" + classPlan.name + "`, a loader class of the project's own, which " +
                    classPlan.reason;
      plan.edit = classPlan.edit;
    } else if (!classPlan.randomSampler && !classPlan.wraps && !endsThroughLoader(loop, *loader, classPlan, context)) {
      const Expr* condition = nullptr;
      if (const auto* f = dyn_cast<ForStmt>(&loop)) condition = f->getCond();
      if (const auto* w = dyn_cast<WhileStmt>(&loop)) condition = w->getCond();
      if (const auto* d = dyn_cast<DoStmt>(&loop)) condition = d->getCond();
      std::string name = classPlan.name.empty() ? loader->getQualifiedNameAsString() : classPlan.name;
      // The class's code is in another file: whether it wraps (a ring never
      // runs out) is known there; the finding holds if that file shards it
      // as a loader that runs out.
      if (classPlan.seenHere || classPlan.where.isValid())
        plan.kind = LoopPlan::NeedsPerson;
      else
        plan.runsOutKey = loaderClassKey(*loader) + "#runs-out";
      plan.outrunsShare = true;
      plan.reason = "it counts its own passes" +
                    (condition ? " (`" + textOf(*condition, context) + "`)" : std::string()) +
                    " and takes a batch from `" + name +
                    "` in each: once the class is sharded it hands out this rank's share only, and the loop would ask "
                    "it for more batches than it has";
      plan.edit =
          "End the loop when the loader runs out (`while (loader.has_next())`, `if (!loader.next(batch)) break;`), "
          "or count the passes with a method of the loader that measures its index list (the share, once "
          "sharded).";
    }
    return true;
  }
  return false;
}

// Data made anew in the loops around, which per-rank draws make each
// rank's own (an RL rollout's buffer): the plan is those draws, when every
// rank runs as many passes over its own.
void perRankInstead(const Stmt& loop, ASTContext& context, LoopPlan& plan) {
  if (plan.kind != LoopPlan::NeedsPerson || !plan.perRankData || !plan.training || !perRankScopeLoop(loop, context))
    return;
  if (std::string why = differingPassCount(loop, context); !why.empty()) {
    plan.reason = why +
                  ": each rank would run its own number of backward passes, and the ranks would wait for each "
                  "other in the gradient all-reduce";
    plan.edit =
        "Give every rank the same number of passes: play a fixed number of steps per rollout, or run the smallest "
        "count over the ranks (`n = fabric.all_reduce(n, fabric::ReduceOp::Min);` before the loop).";
    return;
  }
  plan.kind = LoopPlan::PerRankDraws;
  plan.reason.clear();
  plan.edit.clear();
}

}  // namespace

namespace {

// The loop around `loop` that reads the data `loop` works through (a loop
// over batches around a micro-batch loop): one the migration splits.
const Stmt* coveredBy(const Stmt& loop, ASTContext& context) {
  for (const Stmt* outer : enclosingLoops(loop, context)) {
    LoopPlan probe;
    probe.training = true;
    if (classifyData(*outer, context, probe) && (isShardedPlan(probe) || probe.kind == LoopPlan::AlreadySharded))
      return outer;
  }
  return nullptr;
}

// A loop inside the training loop that reads the batches and sums the loss
// one backward pass after it reads (`total += loss(batch)`; `total.backward()`).
const Stmt* lossSummingLoop(const Stmt& trainingLoop, ASTContext& context) {
  const Stmt* found = nullptr;
  walk(bodyOf(trainingLoop), [&](const Stmt& s) {
    if (found || !isLoop(s) || !planFor(s, context).sumsLoss) return;
    LoopPlan probe;
    probe.training = true;
    if (classifyData(s, context, probe) && isShardedPlan(probe)) found = &s;
  });
  return found;
}

}  // namespace

const LoopPlan& planFor(const Stmt& loop, ASTContext& context) {
  PlanCache& plans = cacheFor(context);
  // Inserted before it is made: a plan that asks for itself (through the
  // per-rank scope of the loops around it) sees it unfinished, not forever.
  auto [entry, inserted] = plans.plans.try_emplace(&loop);
  if (!inserted) return entry->second;
  LoopPlan& plan = entry->second;
  plan.loop = &loop;
  plan.training = runsBackward(loop, context);
  auto done = [&]() -> const LoopPlan& { return plan; };
  if (!isLoop(loop)) return done();
  const FunctionDecl* function = functionOf(loop, context);
  if (!function || !function->getBody()) return done();
  if (!plan.training) {
    // An evaluation: worth sharding only when it runs the model and sums
    // metrics it reads after.
    std::vector<const VarDecl*> sums = metrics::accumulatorsOf(loop, *function->getBody(), context);
    // Or members a class's evaluate() sums afresh for its fit() to read.
    if (!runsModel(loop, context) || (sums.empty() && metrics::memberSumsOf(loop, *function, context).empty())) {
      plan.reason = "it runs no backward pass and sums no model output read after it";
      return done();
    }
    // A loss summed over batches and back-propagated once after the loop:
    // part of the training loop around it (lossSummingLoop).
    for (const VarDecl* sum : sums)
      if (feedsBackwardAfter(*sum, loop, *function->getBody(), context)) {
        plan.sumsLoss = true;
        plan.reason = "it sums the loss `" + sum->getNameAsString() + "`, which a backward pass after it reads";
        return done();
      }
    if (!classifyData(loop, context, plan)) plan.reason = "it sums metrics over data the tool does not see it index";
    if (plan.kind == LoopPlan::NeedsPerson) plan.kind = LoopPlan::NotData;  // every rank evaluates all: correct
    return done();
  }
  if (!isInnermostTrainingLoop(loop, context)) {
    // A loop around the training loop: the data loop when it reads the data
    // and no loop nearer the backward pass does (a micro-batch loop, a GAN's
    // discriminator steps inside a loop over batches).
    if (!classifyData(loop, context, plan)) {
      plan = LoopPlan{};
      plan.loop = &loop;
      plan.training = true;
      plan.reason = "it runs the training loop inside it";
      return done();
    }
    bool nearer = false;
    walk(bodyOf(loop), [&](const Stmt& s) {
      if (nearer || !isInnermostTrainingLoop(s, context)) return;
      std::vector<const Stmt*> chain{&s};
      for (const Stmt* outer : enclosingLoops(s, context)) {
        if (outer == &loop) break;
        chain.push_back(outer);
      }
      for (const Stmt* candidate : chain) {
        LoopPlan probe;
        probe.training = true;
        // A micro-batch loop over the batch this loop takes is not nearer data.
        if (classifyData(*candidate, context, probe) &&
            !(probe.kind == LoopPlan::NeedsPerson && probe.perRankData && coveredBy(*candidate, context)))
          nearer = true;
      }
    });
    if (nearer) {
      plan = LoopPlan{};
      plan.loop = &loop;
      plan.training = true;
      plan.reason = "a loop inside it reads the data";
      return done();
    }
    perRankInstead(loop, context, plan);
    return done();
  }
  if (classifyData(loop, context, plan)) {
    // A micro-batch loop over a batch the loop around takes (`xb =
    // X.slice(0, i, i + bs)` there): that loop is the data loop.
    if (plan.kind == LoopPlan::NeedsPerson && plan.perRankData)
      if (const Stmt* outer = coveredBy(loop, context)) {
        plan = LoopPlan{};
        plan.loop = &loop;
        plan.training = true;
        plan.kind = LoopPlan::Covered;
        plan.dataLoop = outer;
        return done();
      }
    perRankInstead(loop, context, plan);
    return done();
  }
  // A loss summed over the batches of a loop inside, one backward pass after.
  if (const Stmt* summing = lossSummingLoop(loop, context)) {
    const SourceManager& sm = context.getSourceManager();
    plan.kind = LoopPlan::NeedsPerson;
    plan.reason = "it sums the loss over the batches of the loop at line " +
                  std::to_string(sm.getExpansionLineNumber(summing->getBeginLoc())) +
                  " and runs one backward pass after it: with that loop split, each rank's sum covers its share, "
                  "and the gradient averaged over the ranks is 1/N of one process's";
    plan.edit =
        "Split the summing loop (fabric.shard_range, fabric.shard_elements) and multiply the sum by "
        "`fabric.world_size()` before fabric.backward, so the averaged gradient is the whole sum's; or run a "
        "backward pass per batch.";
    return done();
  }
  // Nothing read here: the data may come from a loop around it.
  for (const Stmt* outer : enclosingLoops(loop, context)) {
    LoopPlan probe;
    probe.training = true;
    if (classifyData(*outer, context, probe)) {
      plan.kind = LoopPlan::Covered;
      plan.dataLoop = outer;
      return done();
    }
  }
  if (const Stmt* scope = perRankScopeLoop(loop, context)) {
    if (std::string why = differingPassCount(loop, context); !why.empty()) {
      plan.kind = LoopPlan::NeedsPerson;
      plan.reason = why +
                    ": each rank plays its own, runs its own number of backward passes, and the ranks would "
                    "wait for each other in the gradient all-reduce";
      plan.edit =
          "Give every rank the same number of passes: a fixed number of steps, or the smallest count over the "
          "ranks (`fabric.all_reduce(n, fabric::ReduceOp::Min)`).";
    } else if (drawsFromLibTorch(*scope, context) || !perRankEngineSeeds(*scope, context).empty()) {
      plan.kind = LoopPlan::PerRankDraws;
    } else {
      plan.kind = LoopPlan::NeedsPerson;
      plan.reason = "it draws its data from " + drawsIn(*scope, context).front() +
                    ", seeded alike on every rank, and the tool does not see where it is seeded";
      plan.edit =
          "Seed it per rank after fabric.launch(): `std::srand(seed + fabric.global_rank())`, or the "
          "engine's seed plus `fabric.global_rank()`.";
    }
    return done();
  }
  std::string whole = wholeDataRead(loop, context);
  if (!whole.empty()) {
    plan.kind = LoopPlan::NeedsPerson;
    plan.reason =
        "every step reads all of `" + whole + "` (full-batch training): every rank computes the same gradient";
    plan.edit = "Give each rank its rows before the loop, e.g. `" + whole + " = " + whole +
                ".index_select(0, fabric.shard(torch::arange(" + whole +
                ".size(0))))` (and the same rows of its "
                "targets), so each rank's gradient covers its part and their average the whole.";
    return done();
  }
  // Nothing the loop calls could hand it a batch (it trains on a fixed
  // input made in the loop): no data to split.
  // A call of the project's that returns something, a lambda, or one handed
  // the loop's own variable (`step(i, bs)`, `train_step(batch_index)`)
  // could hand it a batch.
  bool possibleSource = false;
  std::set<const ValueDecl*> loopVariables;
  if (const auto* f = dyn_cast<ForStmt>(&loop))
    walk(f->getInit(), [&](const Stmt& s) {
      if (const auto* declaration = dyn_cast<DeclStmt>(&s))
        for (const Decl* d : declaration->decls())
          if (const auto* var = dyn_cast<VarDecl>(d)) loopVariables.insert(var);
    });
  // A void call handed the loop's variable after the body's own backward
  // pass (`report(epoch, loss)`) reports; it hands the step nothing.
  const SourceManager& sources = context.getSourceManager();
  SourceLocation firstBackward;
  walk(bodyOf(loop), [&](const Stmt& s) {
    if (!isBackwardCall(s)) return;
    SourceLocation at = sources.getExpansionLoc(s.getBeginLoc());
    if (firstBackward.isInvalid() || sources.isBeforeInTranslationUnit(at, firstBackward)) firstBackward = at;
  });
  walk(bodyOf(loop), [&](const Stmt& s) {
    const auto* call = dyn_cast<CallExpr>(&s);
    if (!call || isModuleCall(s)) return;
    const FunctionDecl* callee = calleeOf(*call);
    if (!callee || isLibTorchOrStd(*callee)) return;
    if (const auto* method = dyn_cast<CXXMethodDecl>(callee); method && method->getParent()->isLambda()) {
      possibleSource = true;
      return;
    }
    if (isa<CXXOperatorCallExpr>(call) && cast<CXXOperatorCallExpr>(call)->getOperator() != OO_Call) return;
    bool handedLoopVariable = false;
    for (const Expr* arg : call->arguments()) handedLoopVariable = handedLoopVariable || mentions(arg, loopVariables);
    bool afterBackward = firstBackward.isValid() &&
                         sources.isBeforeInTranslationUnit(firstBackward, sources.getExpansionLoc(call->getBeginLoc()));
    if (!call->getType()->isVoidType() || (handedLoopVariable && !afterBackward)) possibleSource = true;
  });
  if (!possibleSource) {
    plan.reason = "it reads no data per step (a fixed input made in the loop)";
    return done();
  }
  plan.kind = LoopPlan::NeedsPerson;
  if (const CXXRecordDecl* source = batchSourceClassOf(loop, context)) {
    if (loaderClassPlan(*source, context).seenHere) {
      plan.reason = "it reads its batches from `" + source->getQualifiedNameAsString() +
                    "`, a class of the project's own that walks no list of indices at a cursor the tool follows";
      plan.edit =
          "Give each rank its share where the class makes each epoch's order: `indices = "
          "fabric::shard(all_indices);` (<fabric/fabric.h>), and measure the epoch by the share's length.";
      return done();
    }
    plan.reason = "it reads its batches from `" + source->getQualifiedNameAsString() +
                  "`, a class of the project's own whose code the tool does not see here";
    plan.edit =
        "Migrate the files that define it too (it is then sharded where it is defined if it walks a list "
        "of indices), or give each rank its share there: `indices = fabric::shard(all_indices);` after it "
        "makes each epoch's order.";
    return done();
  }
  plan.reason =
      "it does not read its batches from a data loader, an index over data, a container or random draws "
      "the tool recognizes";
  plan.edit =
      "Wrap the data in a torch::data::Dataset and iterate fabric.setup_dataloader(dataset, batch_size), or "
      "have each rank take the batches i with i % fabric.world_size() == fabric.global_rank() "
      "(fabric.shard_range), or draw them per rank (fabric.per_rank_random()).";
  return done();
}

bool isTrainingDataLoop(const Stmt& loop, ASTContext& context) {
  if (!isLoop(loop)) return false;
  const LoopPlan& plan = planFor(loop, context);
  if (!plan.training || plan.kind == LoopPlan::Covered) return false;
  if (isInnermostTrainingLoop(loop, context)) return true;
  return plan.kind != LoopPlan::NotData;
}

// --- Per-rank random draws -------------------------------------------------------

namespace {

bool isStdEngine(QualType type);
bool seededPerProcess(const Stmt* init);

// Whether some initializer of an engine (a variable's, or a member's in its
// class or in a constructor's list) satisfies `test`.
bool anyEngineInit(const ValueDecl* engine, const std::function<bool(const Stmt*)>& test) {
  if (const auto* var = dyn_cast_or_null<VarDecl>(engine)) return var->getInit() && test(var->getInit());
  if (const auto* field = dyn_cast_or_null<FieldDecl>(engine)) {
    if (field->hasInClassInitializer() && test(field->getInClassInitializer())) return true;
    if (const auto* record = dyn_cast<CXXRecordDecl>(field->getParent()))
      for (const CXXConstructorDecl* constructor : record->ctors())
        if (const FunctionDecl* definition = constructor->getDefinition())
          for (const CXXCtorInitializer* init : cast<CXXConstructorDecl>(definition)->inits())
            if (init->getMember() == field && test(init->getInit())) return true;
  }
  return false;
}

// Whether a standard engine (a variable or a member) is seeded from the
// device or the clock, so it already differs between processes.
bool engineSeededPerProcess(const ValueDecl* engine) { return anyEngineInit(engine, seededPerProcess); }

// A draw from a standard engine the ranks would share: `dist(gen)`,
// `gen()`, `std::shuffle(b, e, gen)`, `rand()`.
bool isSharedStdDraw(const Stmt& node) {
  if (const auto* call = dyn_cast<CXXOperatorCallExpr>(&node); call && call->getOperator() == OO_Call) {
    for (const Expr* arg : call->arguments())
      if (isStdEngine(arg->getType()) && !engineSeededPerProcess(declOf(arg))) return true;
    return false;
  }
  if (const auto* call = dyn_cast<CallExpr>(&node)) {
    std::string name = qualifiedName(calleeOf(*call));
    if (name == "rand" || name == "std::rand") return true;
    // An order (a loader's epoch), not data: alike on every rank is right
    // where the loop splits it, and a sharded loop makes it rank 0's.
    if (name == "std::shuffle") return false;
    if (name.rfind("std::", 0) == 0)
      for (const Expr* arg : call->arguments())
        if (isStdEngine(arg->getType()) && !engineSeededPerProcess(declOf(arg))) return true;
  }
  return false;
}

// Whether an engine's seed names the rank (`std::mt19937 rng(seed +
// fabric::global_rank())`): migrated code.
bool mentionsGlobalRank(const Stmt* s);

bool seededByRank(const ValueDecl* engine) { return anyEngineInit(engine, mentionsGlobalRank); }

// A loop (or the loops around it in its function) drawing from an engine
// already seeded per rank.
bool drawsFromRankSeededEngine(const Stmt& loop, ASTContext& context) {
  std::vector<const Stmt*> scopes{&loop};
  for (const Stmt* outer : enclosingLoops(loop, context)) scopes.push_back(outer);
  bool found = false;
  for (const Stmt* scope : scopes)
    walk(bodyOf(*scope), [&](const Stmt& node) {
      if (const auto* call = dyn_cast<CallExpr>(&node))
        for (const Expr* arg : call->arguments())
          if (isStdEngine(arg->getType()) && seededByRank(declOf(arg))) found = true;
    });
  return found;
}

// Draws in `s` (and in what it calls) that the ranks must not share: every
// torch draw except the permutations a sharded loop inside reads (those
// become rank 0's), and draws from standard engines seeded alike on every
// rank.
std::vector<const Stmt*> unsharedDraws(const Stmt& s, ASTContext& context) {
  std::set<const Expr*> agreed;
  walk(&s, [&](const Stmt& node) {
    if (isLoop(node) && !runsBackward(node, context)) return;
    if (isLoop(node))
      if (const auto* inner = &node; isInnermostTrainingLoop(*inner, context)) {
        const LoopPlan& plan = planFor(*inner, context);
        for (const Agreement& a : plan.agreements) agreed.insert(a.call);
      }
  });
  std::vector<const Stmt*> draws;
  auto visit = [&](const Stmt& node) {
    if ((isTorchDraw(node) || isSharedStdDraw(node)) && !agreed.count(dyn_cast<Expr>(&node))) draws.push_back(&node);
  };
  walk(isLoop(s) ? bodyOf(s) : &s, visit);
  std::set<const FunctionDecl*> seen;
  forEachCalled(isLoop(s) ? bodyOf(s) : &s, context, 2, seen, [&](const FunctionDecl& function) {
    // A loader class's own shuffle makes its epoch's order, which
    // fabric::shard makes rank 0's: not a draw to take per rank.
    if (const auto* method = dyn_cast<CXXMethodDecl>(&function))
      if (loaderClassPlan(*method->getParent(), context).where.isValid()) return;
    walk(function.getBody(), visit);
  });
  return draws;
}

}  // namespace

const Stmt* perRankScopeLoop(const Stmt& loop, ASTContext& context) {
  std::vector<const Stmt*> candidates{&loop};
  for (const Stmt* outer : enclosingLoops(loop, context)) candidates.push_back(outer);
  const Stmt* chosen = nullptr;
  for (const Stmt* candidate : candidates)
    if (runsBackward(*candidate, context) && !unsharedDraws(*candidate, context).empty()) chosen = candidate;
  return chosen;
}

std::vector<std::string> drawsIn(const Stmt& scopeLoop, ASTContext& context) {
  std::vector<std::string> names;
  for (const Stmt* draw : unsharedDraws(scopeLoop, context)) {
    std::string name;
    if (const auto* member = dyn_cast<CXXMemberCallExpr>(draw))
      name = "." + member->getMethodDecl()->getNameAsString() + "()";
    else if (const auto* op = dyn_cast<CXXOperatorCallExpr>(draw))
      name = "a std engine (`" + textOf(*op, context) + "`)";
    else if (const auto* call = dyn_cast<CallExpr>(draw))
      name = qualifiedName(calleeOf(*call));
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

bool drawsFromLibTorch(const Stmt& scopeLoop, ASTContext& context) {
  for (const Stmt* draw : unsharedDraws(scopeLoop, context))
    if (isTorchDraw(*draw)) return true;
  return false;
}

bool isPerRankScope(const Stmt& loop, ASTContext& context) {
  if (!isLoop(loop)) return false;
  bool opened = false, scope = false;
  walk(bodyOf(loop), [&](const Stmt& s) {
    if (const auto* call = dyn_cast<CXXMemberCallExpr>(&s))
      if (const CXXMethodDecl* method = call->getMethodDecl())
        opened = opened || match::plainName(method) == "per_rank_random";
  });
  if (opened) return false;
  auto consider = [&](const Stmt& s) {
    if (!scope && isLoop(s) && isInnermostTrainingLoop(s, context) && perRankScopeLoop(s, context) == &loop)
      scope = true;
  };
  consider(loop);
  walk(bodyOf(loop), consider);
  return scope;
}

namespace {

bool isStdEngine(QualType type) {
  const auto* record = type.getNonReferenceType()->getAsCXXRecordDecl();
  if (!record) return false;
  std::string name = record->getQualifiedNameAsString();
  return name == "std::mersenne_twister_engine" || name == "std::linear_congruential_engine" ||
         name == "std::subtract_with_carry_engine" || name == "std::discard_block_engine" ||
         name == "std::independent_bits_engine" || name == "std::shuffle_order_engine";
}

bool seededPerProcess(const Stmt* init) {
  bool random = false;
  walk(init, [&](const Stmt& s) {
    if (const auto* e = dyn_cast<Expr>(&s)) {
      if (const auto* record = e->getType().getNonReferenceType()->getAsCXXRecordDecl())
        random = random || record->getQualifiedNameAsString() == "std::random_device";
      if (const auto* call = dyn_cast<CallExpr>(e)) {
        std::string name = qualifiedName(calleeOf(*call));
        // The clock, the process, or the rank (migrated code).
        random = random || name == "time" || name == "std::time" || name.find("chrono") != std::string::npos ||
                 name == "getpid" || name == "fabric::global_rank" || name == "fabric::Fabric::global_rank";
      }
    }
  });
  return random;
}

// `fabric::global_rank()` in a seed: seeded per rank already.
bool mentionsGlobalRank(const Stmt* s) {
  return statements::callsAny(s, {"fabric::global_rank", "fabric::Fabric::global_rank"});
}

// `std::rand()` in a seed: the same on every process until one seeds it.
bool mentionsRand(const Stmt* s) { return statements::callsAny(s, {"rand", "std::rand"}); }

// The engines `s` draws from: `dist(gen)`, `gen()`, `std::shuffle(b, e, gen)`.
void enginesDrawnIn(const Stmt* s, std::set<const ValueDecl*>& engines) {
  walk(s, [&](const Stmt& node) {
    if (const auto* call = dyn_cast<CXXOperatorCallExpr>(&node); call && call->getOperator() == OO_Call) {
      for (const Expr* arg : call->arguments())
        if (isStdEngine(arg->getType()))
          if (const ValueDecl* engine = declOf(arg)) engines.insert(engine);
    }
    if (const auto* call = dyn_cast<CallExpr>(&node); call && !isa<CXXOperatorCallExpr>(call)) {
      std::string name = qualifiedName(calleeOf(*call));
      if (name.rfind("std::", 0) == 0)
        for (const Expr* arg : call->arguments())
          if (isStdEngine(arg->getType()))
            if (const ValueDecl* engine = declOf(arg)) engines.insert(engine);
    }
  });
}

}  // namespace

std::vector<SourceEdit> perRankEngineSeeds(const Stmt& scopeLoop, ASTContext& context) {
  std::vector<SourceEdit> out;
  const SourceManager& sm = context.getSourceManager();
  const FunctionDecl* function = functionOf(scopeLoop, context);
  if (!function || !function->getBody()) return out;
  std::set<const ValueDecl*> engines;
  enginesDrawnIn(bodyOf(scopeLoop), engines);
  std::set<const FunctionDecl*> seen;
  forEachCalledBody(bodyOf(scopeLoop), context, 2, seen, [&](const Stmt& body) { enginesDrawnIn(&body, engines); });
  const std::string rank = "fabric::global_rank()";
  // `rand()` drawn: the `srand(s)` before the loop, in this function.
  bool drawsRand = false;
  auto findRand = [&](const Stmt& body) {
    walk(&body, [&](const Stmt& node) {
      if (const auto* call = dyn_cast<CallExpr>(&node)) {
        std::string name = qualifiedName(calleeOf(*call));
        drawsRand = drawsRand || name == "rand" || name == "std::rand";
      }
    });
  };
  findRand(*bodyOf(scopeLoop));
  std::set<const FunctionDecl*> seenRand;
  forEachCalledBody(bodyOf(scopeLoop), context, 2, seenRand, findRand);
  // `seed` -> `seed + fabric::global_rank()`; in braces, where a narrowing
  // conversion is an error, cast to the engine's result_type.
  auto seedArgument = [&](const Expr& argument, const ValueDecl* engine = nullptr,
                          bool braces = false) -> std::vector<SourceEdit> {
    CharSourceRange range =
        Lexer::makeFileCharRange(CharSourceRange::getTokenRange(argument.getSourceRange()), sm, context.getLangOpts());
    if (range.isInvalid()) return {};
    std::string text = operand(argument, context) + " + " + rank;
    if (braces && engine)
      if (const auto* declarator = dyn_cast<DeclaratorDecl>(engine); declarator && declarator->getTypeSourceInfo())
        text = "static_cast<" + textOf(declarator->getTypeSourceInfo()->getTypeLoc().getSourceRange(), context) +
               "::result_type>(" + text + ")";
    return {{range.getBegin(), range.getEnd(), text}};
  };
  if (drawsRand) {
    const CallExpr* seeding = nullptr;
    walk(function->getBody(), [&](const Stmt& node) {
      const auto* call = dyn_cast<CallExpr>(&node);
      if (!call || call->getNumArgs() != 1) return;
      std::string name = qualifiedName(calleeOf(*call));
      if ((name == "srand" || name == "std::srand") &&
          sm.isBeforeInTranslationUnit(sm.getExpansionLoc(node.getBeginLoc()),
                                       sm.getExpansionLoc(scopeLoop.getBeginLoc())))
        seeding = call;
    });
    if (seeding && !seededPerProcess(seeding->getArg(0))) {
      const Expr& argument = *seeding->getArg(0);
      CharSourceRange range = Lexer::makeFileCharRange(CharSourceRange::getTokenRange(argument.getSourceRange()), sm,
                                                       context.getLangOpts());
      if (range.isValid()) out.push_back({range.getBegin(), range.getEnd(), operand(argument, context) + " + " + rank});
    }
  }
  for (const ValueDecl* engine : engines) {
    // Drawn before the loop too (data made once): that must stay the same
    // on every rank; left alone.
    bool usedBefore = false;
    walk(function->getBody(), [&](const Stmt& s) {
      if (usedBefore || !sm.isBeforeInTranslationUnit(sm.getExpansionLoc(s.getBeginLoc()),
                                                      sm.getExpansionLoc(scopeLoop.getBeginLoc())))
        return;
      std::set<const ValueDecl*> drawn;
      if (isa<CallExpr>(s)) enginesDrawnIn(&s, drawn);
      usedBefore = drawn.count(engine) > 0;
    });
    if (usedBefore) continue;
    // The last `gen.seed(s)` before the loop, if any, is where its seed is.
    const CXXMemberCallExpr* seedCall = nullptr;
    walk(function->getBody(), [&](const Stmt& s) {
      const auto* call = dyn_cast<CXXMemberCallExpr>(&s);
      if (call && call->getMethodDecl() && match::plainName(call->getMethodDecl()) == "seed" &&
          call->getNumArgs() == 1 && declOf(call->getImplicitObjectArgument()) == engine &&
          sm.isBeforeInTranslationUnit(sm.getExpansionLoc(s.getBeginLoc()),
                                       sm.getExpansionLoc(scopeLoop.getBeginLoc())))
        seedCall = call;
    });
    if (seedCall) {
      if (seededPerProcess(seedCall->getArg(0))) continue;
      for (SourceEdit& e : seedArgument(*seedCall->getArg(0))) out.push_back(e);
      continue;
    }
    const Expr* init = nullptr;
    if (const auto* var = dyn_cast<VarDecl>(engine)) {
      if (!var->hasLocalStorage() || isa<ParmVarDecl>(var)) continue;  // a global: before launch()
      if (!sm.isBeforeInTranslationUnit(sm.getExpansionLoc(var->getLocation()),
                                        sm.getExpansionLoc(scopeLoop.getBeginLoc())))
        continue;
      init = var->getInit();
      if (init && seededPerProcess(init)) continue;
      const auto* construct = init ? dyn_cast<CXXConstructExpr>(strip(init)) : nullptr;
      if (construct && construct->getNumArgs() == 1 && !isa<CXXDefaultArgExpr>(construct->getArg(0))) {
        for (SourceEdit& e : seedArgument(*construct->getArg(0), var, construct->isListInitialization()))
          out.push_back(e);
      } else if (!construct || construct->getNumArgs() == 0) {
        // `std::mt19937 gen;`: its default seed, plus the rank.
        std::string type = textOf(var->getTypeSourceInfo()->getTypeLoc().getSourceRange(), context);
        SourceLocation name =
            Lexer::getLocForEndOfToken(sm.getExpansionLoc(var->getLocation()), 0, sm, context.getLangOpts());
        if (type == "auto") continue;
        out.push_back({name, name, "(" + type + "::default_seed + " + rank + ")"});
      }
      continue;
    }
    if (const auto* field = dyn_cast<FieldDecl>(engine)) {
      // A member: its initializer in a constructor here, or in the class.
      const auto* record = dyn_cast<CXXRecordDecl>(field->getParent());
      if (!record || isLibTorchOrStd(*record)) continue;
      bool edited = false;
      for (const CXXConstructorDecl* constructor : record->ctors()) {
        const FunctionDecl* definition = constructor->getDefinition();
        if (!definition) continue;
        for (const CXXCtorInitializer* initializer : cast<CXXConstructorDecl>(definition)->inits())
          if (initializer->isWritten() && initializer->getMember() == field) {
            const auto* construct = dyn_cast<CXXConstructExpr>(strip(initializer->getInit()));
            if (construct && construct->getNumArgs() == 1 && !seededPerProcess(construct)) {
              for (SourceEdit& e : seedArgument(*construct->getArg(0), field, construct->isListInitialization()))
                out.push_back(e);
              edited = true;
            }
          }
      }
      if (!edited && field->hasInClassInitializer()) {
        const auto* construct = dyn_cast_or_null<CXXConstructExpr>(strip(field->getInClassInitializer()));
        if (construct && construct->getNumArgs() == 1 && !seededPerProcess(construct))
          for (SourceEdit& e : seedArgument(*construct->getArg(0), field, construct->isListInitialization()))
            out.push_back(e);
      }
    }
  }
  return out;
}

// --- Loader classes -------------------------------------------------------------

std::string loaderClassKey(const CXXRecordDecl& record) {
  llvm::SmallString<128> usr;
  if (index::generateUSRForDecl(&record, usr)) return "loader-class:" + record.getQualifiedNameAsString();
  return "loader-class:" + std::string(usr);
}

namespace {
const CXXRecordDecl* loaderLikeClassOf(const Stmt& loop, ASTContext& context, bool needsIndexField);
}  // namespace

const CXXRecordDecl* ownLoaderClassOf(const Stmt& loop, ASTContext& context) {
  return loaderLikeClassOf(loop, context, true);
}
const CXXRecordDecl* batchSourceClassOf(const Stmt& loop, ASTContext& context) {
  return loaderLikeClassOf(loop, context, false);
}

namespace {
const CXXRecordDecl* loaderLikeClassOf(const Stmt& loop, ASTContext& context, bool needsIndexField) {
  const CXXRecordDecl* found = nullptr;
  auto consider = [&](const Stmt& s) {
    if (found) return;
    const Expr* object = nullptr;
    if (const auto* call = dyn_cast<CXXMemberCallExpr>(&s)) object = call->getImplicitObjectArgument();
    if (const auto* call = dyn_cast<CXXOperatorCallExpr>(&s); call && call->getOperator() == OO_Call)
      object = call->getArg(0);
    if (!object) return;
    QualType type = object->getType().getNonReferenceType();
    if (type->isPointerType()) type = type->getPointeeType();
    const CXXRecordDecl* record = type->getAsCXXRecordDecl();
    if (const Type* held = match::heldBy(type, "std::unique_ptr")) record = held->getAsCXXRecordDecl();
    if (const Type* held = match::heldBy(type, "std::shared_ptr")) record = held->getAsCXXRecordDecl();
    if (!record || !record->hasDefinition() || isLibTorchOrStd(*record) || isTensor(type) ||
        match::isModuleType(type) || match::isOptimizerHandle(type))
      return;
    record = record->getDefinition();
    const SourceManager& sm = context.getSourceManager();
    if (sm.isInSystemHeader(sm.getExpansionLoc(record->getLocation()))) return;
    // The object lives across the loop's passes: declared before it.
    const ValueDecl* decl = baseDeclOf(object);
    if (decl &&
        sm.isBeforeInTranslationUnit(sm.getExpansionLoc(loop.getBeginLoc()), sm.getExpansionLoc(decl->getLocation())))
      return;
    // A class that holds a list of indices or an order tensor.
    if (!needsIndexField) {
      found = record;
      return;
    }
    for (const FieldDecl* field : record->fields())
      if (isIndexVector(field->getType()) || isTensor(field->getType())) {
        found = record;
        return;
      }
  };
  auto inCondition = [&] {
    if (const auto* s = dyn_cast<WhileStmt>(&loop)) walk(s->getCond(), consider);
    if (const auto* s = dyn_cast<DoStmt>(&loop)) walk(s->getCond(), consider);
    if (const auto* s = dyn_cast<ForStmt>(&loop)) walk(s->getCond(), consider);
  };
  // In the body: `loader.next()`, `loader.next_batch()`, `loader(batch)`
  // (the batch written into an argument).
  auto inBody = [&] {
    walk(bodyOf(loop), [&](const Stmt& s) {
      if (const auto* call = dyn_cast<CXXOperatorCallExpr>(&s);
          call && call->getOperator() == OO_Call && call->getNumArgs() >= 2) {
        consider(s);
        return;
      }
      const auto* call = dyn_cast<CXXMemberCallExpr>(&s);
      if (!call || !call->getMethodDecl()) return;
      std::string name = llvm::StringRef(call->getMethodDecl()->getNameAsString()).lower();
      if (name.find("next") != std::string::npos || name.find("batch") != std::string::npos) consider(s);
    });
  };
  // A class to name: the body's batch call says more than a condition
  // that measures something (`s < train_set.size() / bs`).
  if (needsIndexField) {
    inCondition();
    if (!found) inBody();
  } else {
    inBody();
    if (!found) inCondition();
  }
  return found;
}
}  // namespace

namespace {

// The pieces of a loader class the plan is made of.
struct ClassScan {
  const CXXRecordDecl* record = nullptr;
  const FieldDecl* order = nullptr;
  std::vector<const CXXMethodDecl*> methods;  // with bodies here, constructors included
  std::set<const CXXMethodDecl*> readers;     // read the order by position
  std::vector<const Expr*> positions;         // the positions they read
  std::set<std::string> lengthKeys;           // what the order's length is spelled as
  std::string lengthText;
};

bool isOrderRead(const Stmt& s, const FieldDecl* order, const Expr*& position) {
  if (const auto* call = dyn_cast<CXXMemberCallExpr>(&s)) {
    const CXXMethodDecl* method = call->getMethodDecl();
    if (!method || declOf(call->getImplicitObjectArgument()) != order) return false;
    llvm::StringRef name = match::plainName(method);
    if ((name == "at" || name == "slice" || name == "narrow" || name == "index" || name == "index_select" ||
         name == "select") &&
        call->getNumArgs() > 0) {
      position = call->getArg(name == "at" ? 0 : std::min<unsigned>(1, call->getNumArgs() - 1));
      return true;
    }
  }
  if (const auto* op = dyn_cast<CXXOperatorCallExpr>(&s);
      op && op->getOperator() == OO_Subscript && declOf(op->getArg(0)) == order) {
    position = op->getArg(1);
    return true;
  }
  // `order.begin() + pos`: an iterator at a position (a batch copied out of
  // [begin() + pos, begin() + end)).
  const Expr *lhs = nullptr, *rhs = nullptr;
  if (const auto* op = dyn_cast<CXXOperatorCallExpr>(&s); op && op->getOperator() == OO_Plus && op->getNumArgs() == 2) {
    lhs = op->getArg(0);
    rhs = op->getArg(1);
  } else if (const auto* op = dyn_cast<BinaryOperator>(&s); op && op->getOpcode() == BO_Add) {
    lhs = op->getLHS();
    rhs = op->getRHS();
  }
  for (int side = 0; side < 2 && lhs; ++side, std::swap(lhs, rhs))
    if (const auto* begin = dyn_cast<CXXMemberCallExpr>(strip(lhs));
        begin && begin->getMethodDecl() &&
        (match::plainName(begin->getMethodDecl()) == "begin" || match::plainName(begin->getMethodDecl()) == "cbegin") &&
        declOf(begin->getImplicitObjectArgument()) == order) {
      position = rhs;
      return true;
    }
  return false;
}

// Statements that make the order: `std::shuffle(order.begin(), ...)`,
// `order = torch::randperm(n)`, `std::iota(...)`, `order.resize(n)`, a fill
// loop `for (i = 0; i < n; ++i) order[i] = i;` (as one statement).
enum class OrderWrite { None, Shuffle, FreshTensor, Fill, Other };

OrderWrite orderWriteOf(const Stmt& s, const Expr*& length) {
  if (isStdShuffle(s)) return OrderWrite::Shuffle;
  if (const auto* call = dyn_cast<CallExpr>(&s); call && qualifiedName(calleeOf(*call)) == "std::random_shuffle")
    return OrderWrite::Shuffle;
  if (const auto* call = dyn_cast<CallExpr>(&s); call && qualifiedName(calleeOf(*call)) == "std::iota")
    return OrderWrite::Fill;
  if (const auto* call = dyn_cast<CXXMemberCallExpr>(&s)) {
    llvm::StringRef name = call->getMethodDecl() ? match::plainName(call->getMethodDecl()) : "";
    if (name == "resize" && call->getNumArgs() > 0) {
      length = call->getArg(0);
      return OrderWrite::Fill;
    }
    if (name == "reserve" || name == "clear" || name == "push_back" || name == "emplace_back") return OrderWrite::Fill;
    return OrderWrite::Other;
  }
  const Expr* rhs = nullptr;
  if (const auto* op = dyn_cast<CXXOperatorCallExpr>(&s); op && op->getOperator() == OO_Equal) rhs = op->getArg(1);
  if (const auto* op = dyn_cast<BinaryOperator>(&s); op && op->getOpcode() == BO_Assign) rhs = op->getRHS();
  if (!rhs) return OrderWrite::Other;
  // `order = std::vector<size_t>(n)`: sized here, filled next.
  const Expr* made = strip(rhs);
  if (const auto* cast = dyn_cast<CXXFunctionalCastExpr>(made)) made = strip(cast->getSubExpr());
  if (const auto* construct = dyn_cast<CXXConstructExpr>(made);
      construct && construct->getNumArgs() >= 1 && isIndexVector(construct->getType())) {
    length = construct->getArg(0);
    return OrderWrite::Fill;
  }
  bool fresh = false;
  walk(rhs, [&](const Stmt& inner) {
    if (const auto* call = dyn_cast<CallExpr>(&inner)) {
      std::string name = qualifiedName(calleeOf(*call));
      if ((name == "torch::randperm" || name == "torch::arange" || name == "at::randperm" || name == "at::arange") &&
          call->getNumArgs() > 0) {
        fresh = true;
        if (!length) length = call->getArg(0);
      }
    }
  });
  return fresh ? OrderWrite::FreshTensor : OrderWrite::Other;
}

// An element write of the order: `order[i] = i`, `order.at(i) = i`.
bool isElementWrite(const Stmt& s, const FieldDecl* order) {
  const Expr* lhs = nullptr;
  if (const auto* op = dyn_cast<BinaryOperator>(&s); op && op->getOpcode() == BO_Assign) lhs = op->getLHS();
  if (const auto* op = dyn_cast<CXXOperatorCallExpr>(&s); op && op->getOperator() == OO_Equal) lhs = op->getArg(0);
  if (!lhs) return false;
  const Expr* position = nullptr;
  return isOrderRead(*strip(lhs), order, position);
}

}  // namespace

namespace {

// A loader class that draws each batch's indices at random from an engine
// of its own (`dataset.get(int_rand(mt))`) rather than walking an order:
// seeded alike on every rank (a constant, std::rand() before any srand) it
// hands every rank the same batches. Its seed gets `+
// fabric::global_rank()`, where the class sets it.
const LoaderClassPlan& randomSamplerPlan(const CXXRecordDecl& record, const std::vector<const CXXMethodDecl*>& methods,
                                         ASTContext& context, LoaderClassPlan& plan) {
  const SourceManager& sm = context.getSourceManager();
  // Drawn where the class hands out a batch or plays a step (operator(),
  // next, *batch*, *sample*, step, reset, act, get): a data set that draws
  // itself once in a generate() keeps its seed (the same data on every rank).
  std::set<const ValueDecl*> drawn;
  std::vector<std::string> where;
  for (const CXXMethodDecl* method : methods) {
    if (isa<CXXConstructorDecl>(method)) continue;
    std::string name =
        method->isOverloadedOperator() ? "operator()" : llvm::StringRef(method->getNameAsString()).lower();
    bool handsOut = name == "operator()" || name == "step" || name == "reset" || name == "act" || name == "get" ||
                    name.find("next") != std::string::npos || name.find("batch") != std::string::npos ||
                    name.find("sample") != std::string::npos;
    if (!handsOut) continue;
    size_t before = drawn.size();
    enginesDrawnIn(method->getBody(), drawn);
    if (drawn.size() > before) where.push_back(method->getNameAsString());
  }
  std::vector<SourceEdit> edits;
  std::string engineName;
  for (const FieldDecl* field : record.fields()) {
    if (!drawn.count(field) || !isStdEngine(field->getType())) continue;
    const std::string rank = "fabric::global_rank()";
    auto seedEdit = [&](const Expr& argument) {
      if (mentionsGlobalRank(&argument) || (seededPerProcess(&argument) && !mentionsRand(&argument))) return;
      CharSourceRange range = Lexer::makeFileCharRange(CharSourceRange::getTokenRange(argument.getSourceRange()), sm,
                                                       context.getLangOpts());
      if (range.isValid())
        edits.push_back({range.getBegin(), range.getEnd(), operand(argument, context) + " + " + rank});
    };
    size_t before = edits.size();
    for (const CXXMethodDecl* method : methods) {
      if (const auto* constructor = dyn_cast<CXXConstructorDecl>(method))
        for (const CXXCtorInitializer* init : constructor->inits())
          if (init->isWritten() && init->getMember() == field)
            if (const auto* construct = dyn_cast<CXXConstructExpr>(strip(init->getInit()));
                construct && construct->getNumArgs() == 1 && !construct->isListInitialization())
              seedEdit(*construct->getArg(0));
      // `this->mt.seed(std::rand())`.
      walk(method->getBody(), [&](const Stmt& s) {
        const auto* call = dyn_cast<CXXMemberCallExpr>(&s);
        if (call && call->getMethodDecl() && match::plainName(call->getMethodDecl()) == "seed" &&
            call->getNumArgs() == 1 && declOf(call->getImplicitObjectArgument()) == field)
          seedEdit(*call->getArg(0));
      });
    }
    if (edits.size() > before) engineName = field->getNameAsString();
  }
  if (edits.empty()) return plan;
  plan.where = record.getLocation();
  plan.member = engineName;
  plan.randomSampler = true;
  for (const std::string& method : where) plan.reason += (plan.reason.empty() ? "" : ", ") + method;
  plan.clear = true;
  plan.edits = edits;
  return plan;
}

}  // namespace

const LoaderClassPlan& loaderClassPlan(const CXXRecordDecl& input, ASTContext& context) {
  PlanCache& plans = cacheFor(context);
  const CXXRecordDecl* record = input.getDefinition() ? input.getDefinition() : &input;
  if (auto found = plans.classes.find(record); found != plans.classes.end()) return found->second;
  LoaderClassPlan& plan = plans.classes[record];
  plan.name = record->getQualifiedNameAsString();
  const SourceManager& sm = context.getSourceManager();
  if (sm.isInSystemHeader(sm.getExpansionLoc(record->getLocation())) || isLibTorchOrStd(*record)) return plan;

  // Every method with a body here: the class's own translation unit.
  std::vector<const CXXMethodDecl*> methods;
  for (const CXXMethodDecl* method : record->methods()) {
    if (method->isImplicit()) continue;
    const FunctionDecl* definition = method->getDefinition();
    if (!definition || !definition->getBody()) {
      if (method->isPureVirtual() || method->isDeleted() || method->isDefaulted()) continue;
      return plan;  // defined in another translation unit: decided there
    }
    methods.push_back(cast<CXXMethodDecl>(definition));
  }
  for (const CXXConstructorDecl* constructor : record->ctors())
    if (!constructor->isImplicit())
      if (const FunctionDecl* definition = constructor->getDefinition();
          definition && std::find(methods.begin(), methods.end(), definition) == methods.end())
        methods.push_back(cast<CXXMethodDecl>(definition));
  plan.seenHere = true;
  if (methods.empty()) return plan;

  // The order: the one index field read by position.
  const FieldDecl* order = nullptr;
  std::set<const CXXMethodDecl*> readers;
  for (const FieldDecl* field : record->fields()) {
    if (!isIndexVector(field->getType()) && !isTensor(field->getType())) continue;
    // Members some method advances (a cursor, a batch count): a loader reads
    // its order at positions made from one, a data set at the index it is
    // asked for (`get(idx)`: not an order).
    std::set<const ValueDecl*> advanced;
    for (const CXXMethodDecl* method : methods) {
      if (isa<CXXConstructorDecl>(method)) continue;
      walk(method->getBody(), [&](const Stmt& s) {
        for (const FieldDecl* other : record->fields())
          if (other != field && other->getType()->isIntegerType() && writes(s, other)) advanced.insert(other);
      });
    }
    std::set<const CXXMethodDecl*> reading;
    for (const CXXMethodDecl* method : methods)
      walk(method->getBody(), [&](const Stmt& s) {
        const Expr* position = nullptr;
        if (!isOrderRead(s, field, position)) return;
        std::set<const ValueDecl*> fromCursor = advanced;
        for (bool grew = true; grew;) {
          grew = false;
          walk(method->getBody(), [&](const Stmt& inner) {
            if (const auto* declaration = dyn_cast<DeclStmt>(&inner))
              for (const Decl* d : declaration->decls())
                if (const auto* var = dyn_cast<VarDecl>(d);
                    var && !fromCursor.count(var) && var->getInit() && mentions(var->getInit(), fromCursor)) {
                  fromCursor.insert(var);
                  grew = true;
                }
            // A counter loop from a cursor: `for (size_t i = cursor_; ...)`.
          });
        }
        if (!position || !mentions(position, fromCursor)) {
          // `for (i = cursor_; i < end; ++i) order[i]`: the loop's counter
          // starts at a cursor.
          bool loopFromCursor = false;
          if (const auto* ref = dyn_cast_or_null<DeclRefExpr>(position ? strip(position) : nullptr))
            if (const auto* var = dyn_cast<VarDecl>(ref->getDecl()); var && var->getInit())
              loopFromCursor = mentions(var->getInit(), fromCursor);
          if (!loopFromCursor) return;
        }
        // `order[i] = i` fills the order; it does not read it.
        const Stmt* parent = parentStmt(s, context);
        if (const auto* op = dyn_cast_or_null<BinaryOperator>(parent); op && op->isAssignmentOp() && op->getLHS() == &s)
          return;
        if (const auto* op = dyn_cast_or_null<CXXOperatorCallExpr>(parent);
            op && op->getOperator() == OO_Equal && op->getArg(0) == &s)
          return;
        reading.insert(method);
      });
    if (reading.empty()) continue;
    // A tensor field read by position is an order only if the class makes it
    // from a permutation or arange (not the data itself).
    bool made = false;
    for (const CXXMethodDecl* method : methods)
      walk(method->getBody(), [&](const Stmt& s) {
        if (!writes(s, field)) return;
        const Expr* length = nullptr;
        OrderWrite kind = orderWriteOf(s, length);
        made = made || kind == OrderWrite::Shuffle || kind == OrderWrite::FreshTensor || kind == OrderWrite::Fill;
      });
    if (isTensor(field->getType()) && !made) continue;
    if (order) {
      plan.where = field->getLocation();
      plan.reason = "reads two lists of indices by position (`" + order->getNameAsString() + "`, `" +
                    field->getNameAsString() + "`)";
      plan.edit =
          "take this rank's share of the one that orders the epoch where it is made: `order = "
          "fabric::shard(all_order);`";
      return plan;
    }
    order = field;
    readers = reading;
  }
  if (!order) return randomSamplerPlan(*record, methods, context, plan);
  plan.member = order->getNameAsString();
  plan.where = order->getLocation();

  // Migrated already?
  for (const CXXMethodDecl* method : methods)
    walk(method->getBody(), [&](const Stmt& s) {
      if (const auto* call = dyn_cast<CallExpr>(&s)) {
        std::string name = qualifiedName(calleeOf(*call));
        if (name == "fabric::shard" || name == "fabric::Fabric::shard") plan.sharded = true;
      }
    });
  if (plan.sharded) return plan;

  auto fail = [&](std::string reason, std::string edit) -> const LoaderClassPlan& {
    plan.clear = false;
    plan.reason = std::move(reason);
    plan.edit = std::move(edit);
    plan.edits.clear();
    return plan;
  };
  std::string member = order->getNameAsString();
  std::string all = llvm::StringRef(member).starts_with("m_") ? "m_all_" + member.substr(2) : "all_" + member;
  bool tensorOrder = isTensor(order->getType());
  std::string defaultEdit =
      "after the statement that makes each epoch's order, keep the full order in another member "
      "and give `" +
      member + "` this rank's share: `" + member + " = fabric::shard(" + all +
      ");` (<fabric/fabric.h>: rank 0's order, this rank's strided part; every rank the same "
      "count while training)";

  // Every write of the order, by statement; the length it is made with.
  struct Write {
    const CXXMethodDecl* method;
    const Stmt* statement;  // the whole statement in its block
    const Stmt* call;       // the write itself
    OrderWrite kind;
  };
  std::vector<Write> orderWrites;
  std::set<std::string> lengthKeys;
  auto statementOf = [&](const Stmt& s, const Stmt& body) -> const Stmt* {
    const Stmt* current = &s;
    for (int depth = 0; depth < 64; ++depth) {
      const Stmt* parent = parentStmt(*current, context);
      if (!parent) return nullptr;
      if (isa<CompoundStmt>(parent)) return current;
      if (parent == &body) return current;
      current = parent;
    }
    return nullptr;
  };
  // Constructor parameters kept in members (`ds_(ds)`): `ds.size()` in the
  // constructor is `ds_.size()` elsewhere.
  std::map<std::string, std::string> storedAs;
  for (const CXXMethodDecl* method : methods)
    if (const auto* constructor = dyn_cast<CXXConstructorDecl>(method))
      for (const CXXCtorInitializer* init : constructor->inits())
        if (init->isWritten() && init->getMember())
          if (const auto* param = dyn_cast_or_null<ParmVarDecl>(declOf(init->getInit())))
            storedAs[param->getNameAsString()] = init->getMember()->getNameAsString();
  auto addLength = [&](const Expr* length) {
    if (!length) return;
    std::string key = keyOf(*length, context);
    lengthKeys.insert(key);
    size_t dot = key.find_first_of(".-[(");
    if (auto stored = storedAs.find(key.substr(0, dot)); stored != storedAs.end())
      lengthKeys.insert(stored->second + key.substr(dot == std::string::npos ? key.size() : dot));
  };
  for (const CXXMethodDecl* method : methods) {
    const Stmt* body = method->getBody();
    std::set<const Stmt*> fillLoops;
    walk(body, [&](const Stmt& s) {
      if (!writes(s, order) || isa<ExprWithCleanups>(s)) return;
      const Expr* length = nullptr;
      OrderWrite kind = orderWriteOf(s, length);
      const Stmt* statement = statementOf(s, *body);
      // `for (i = 0; i < n; ++i) order[i] = i;` is one fill: the loop.
      bool appends = false;
      if (const auto* call = dyn_cast<CXXMemberCallExpr>(&s); call && call->getMethodDecl())
        appends = match::plainName(call->getMethodDecl()) == "push_back" ||
                  match::plainName(call->getMethodDecl()) == "emplace_back";
      if ((kind == OrderWrite::Other && isElementWrite(s, order)) || (appends && statement && !isLoop(*statement))) {
        const Stmt* current = &s;
        const ForStmt* fill = nullptr;
        for (int depth = 0; depth < 8 && current; ++depth) {
          current = parentStmt(*current, context);
          if (current && (fill = dyn_cast<ForStmt>(current))) break;
        }
        if (fill && contains(*body, *fill, sm)) {
          if (const auto* cond = dyn_cast_or_null<BinaryOperator>(strip(fill->getCond()));
              cond && cond->getOpcode() == BO_LT)
            length = cond->getRHS();
          kind = OrderWrite::Fill;
          statement = statementOf(*fill, *body);
          if (!fillLoops.insert(fill).second) return;
          addLength(length);
          orderWrites.push_back({method, statement, fill, kind});
          return;
        }
      }
      addLength(length);
      orderWrites.push_back({method, statement, &s, kind});
    });
  }
  // The constructor's member initializer `order_(n)`.
  const CXXCtorInitializer* orderInit = nullptr;
  for (const CXXMethodDecl* method : methods)
    if (const auto* constructor = dyn_cast<CXXConstructorDecl>(method))
      for (const CXXCtorInitializer* init : constructor->inits())
        if (init->isWritten() && init->getMember() == order) {
          orderInit = init;
          if (const auto* construct = dyn_cast<CXXConstructExpr>(strip(init->getInit()));
              construct && construct->getNumArgs() >= 1 && !isa<CXXDefaultArgExpr>(construct->getArg(0)))
            addLength(construct->getArg(0));
        }
  for (const Write& w : orderWrites)
    if (w.kind == OrderWrite::Other || !w.statement)
      return fail("changes `" + member + "` in a way the tool does not follow (`" + textOf(*w.call, context) + "`)",
                  defaultEdit);
  bool inPlace = false;
  for (const Write& w : orderWrites) inPlace = inPlace || w.kind == OrderWrite::Shuffle || w.kind == OrderWrite::Fill;
  if (orderWrites.empty() && !orderInit) return fail("does not make `" + member + "` in its own code", defaultEdit);

  // The cursor: members the readers advance and read positions with.
  std::set<const ValueDecl*> cursors;
  for (const CXXMethodDecl* reader : readers)
    walk(reader->getBody(), [&](const Stmt& s) {
      for (const FieldDecl* field : record->fields())
        if (field != order && writes(s, field) && (field->getType()->isIntegerType() || isTensor(field->getType())))
          cursors.insert(field);
    });
  // Locals of the readers computed from a cursor (`idx_start = batch_size * count`).
  std::set<const ValueDecl*> fromCursor = cursors;
  for (const CXXMethodDecl* reader : readers)
    for (bool grew = true; grew;) {
      grew = false;
      walk(reader->getBody(), [&](const Stmt& s) {
        if (const auto* declaration = dyn_cast<DeclStmt>(&s))
          for (const Decl* d : declaration->decls())
            if (const auto* var = dyn_cast<VarDecl>(d);
                var && !fromCursor.count(var) && var->getInit() && mentions(var->getInit(), fromCursor)) {
              fromCursor.insert(var);
              grew = true;
            }
      });
    }
  auto mentionsCursor = [&](const Stmt* s) {
    bool found = false;
    walk(s, [&](const Stmt& node) {
      if (const ValueDecl* d = declOf(dyn_cast<Expr>(&node)); d && fromCursor.count(d)) found = true;
    });
    return found;
  };
  auto isShareLength = [&](const Expr* e) {
    e = strip(e);
    const auto* call = dyn_cast_or_null<CXXMemberCallExpr>(e);
    if (!call || !call->getMethodDecl() || declOf(call->getImplicitObjectArgument()) != order) return false;
    llvm::StringRef name = match::plainName(call->getMethodDecl());
    return name == "size" || name == "numel";
  };
  auto lengthOfShare = [&](const Expr& like) {
    // Spelled as the class spells the order: `this->idx`, `indices_`.
    std::string prefix = textOf(like, context).find("this->") != std::string::npos ? "this->" : "";
    return prefix + member + (tensorOrder ? ".size(0)" : ".size()");
  };
  // Members computed from the length in the constructor (koba's count_max).
  std::set<const ValueDecl*> lengthMembers;
  std::vector<const Expr*> lengthUses;  // the spelled lengths to replace
  auto lengthKeyOf = [&](const Expr* e) { return e ? keyOf(*e, context) : std::string(); };
  auto isLength = [&](const Expr* e) { return e && lengthKeys.count(lengthKeyOf(e)); };
  // Each comparison or min/max with a cursor on one side: the other side must
  // be the share's length, a spelled length, or a member made from one.
  std::string problem;
  for (const CXXMethodDecl* method : methods) {
    walk(method->getBody(), [&](const Stmt& s) {
      if (!problem.empty()) return;
      std::vector<const Expr*> sides;
      if (const auto* op = dyn_cast<BinaryOperator>(&s); op && op->isComparisonOp())
        sides = {op->getLHS(), op->getRHS()};
      // A position wrapped around the length: `order_[(cursor_ + k) % n]`.
      if (const auto* op = dyn_cast<BinaryOperator>(&s);
          op && op->getOpcode() == BO_Rem && mentionsCursor(op->getLHS()))
        sides = {op->getLHS(), op->getRHS()};
      if (const auto* call = dyn_cast<CallExpr>(&s)) {
        std::string name = qualifiedName(calleeOf(*call));
        if (name == "std::min" || name == "std::max")
          for (const Expr* arg : call->arguments()) sides.push_back(arg);
      }
      if (sides.empty()) return;
      bool cursorSide = false;
      for (const Expr* side : sides) cursorSide = cursorSide || mentionsCursor(side);
      if (!cursorSide) return;
      for (const Expr* side : sides) {
        if (mentionsCursor(side) || isShareLength(side)) continue;
        if (isLength(side)) {
          lengthUses.push_back(strip(side));
          continue;
        }
        const ValueDecl* named = declOf(side);
        if (named && isa<FieldDecl>(named)) {
          lengthMembers.insert(named);
          continue;
        }
        // A local of the method (a counter over the batch's samples) or a
        // literal: not the epoch's length.
        if (isa<IntegerLiteral>(strip(side))) continue;
        if (const auto* var = dyn_cast_or_null<VarDecl>(named); var && var->hasLocalStorage() && !isa<ParmVarDecl>(var))
          continue;
        problem = "measures its epoch with `" + textOf(*side, context) +
                  "`, which the tool cannot tie to the length of `" + member + "`";
      }
    });
  }
  if (!problem.empty()) return fail(problem, defaultEdit);
  // A member the epoch is measured by must be made from the length alone.
  // Made once, in a constructor (`count_max = ceil(size / batch_size)`), it
  // holds the first share's length for good: every share must then have it,
  // so the class's shares are always padded (an evaluation through it may
  // count up to N-1 samples twice, as a padded DistributedSampler does).
  bool fixedLength = false;
  for (const ValueDecl* lengthMember : lengthMembers) {
    bool madeFromLength = false;
    for (const CXXMethodDecl* method : methods)
      walk(method->getBody(), [&](const Stmt& s) {
        if (!writes(s, lengthMember)) return;
        if (isa<CXXConstructorDecl>(method) && !cursors.count(lengthMember)) fixedLength = true;
        const Expr* rhs = nullptr;
        if (const auto* op = dyn_cast<BinaryOperator>(&s); op && op->isAssignmentOp()) rhs = op->getRHS();
        if (!rhs) return;
        walk(rhs, [&](const Stmt& inner) {
          const auto* e = dyn_cast<Expr>(&inner);
          if (e && isLength(e)) {
            madeFromLength = true;
            lengthUses.push_back(strip(e));
          }
        });
      });
    if (!madeFromLength && !cursors.count(lengthMember))
      return fail("measures its epoch with `" + lengthMember->getNameAsString() +
                      "`, which the tool cannot tie to the length of `" + member + "`",
                  defaultEdit);
  }

  // The edits.
  plan.clear = true;
  // A ring: the readers wrap the cursor around the length (`order_[(cursor_ +
  // k) % n]`, `if (cursor_ >= n) cursor_ = 0;`), so the loader never runs
  // out and a loop may count its own passes.
  for (const CXXMethodDecl* reader : readers)
    walk(reader->getBody(), [&](const Stmt& s) {
      if (const auto* op = dyn_cast<BinaryOperator>(&s);
          op && op->getOpcode() == BO_Rem && mentionsCursor(op->getLHS()))
        plan.wraps = true;
      const auto* branch = dyn_cast<IfStmt>(&s);
      if (!branch || !branch->getCond() || !mentionsCursor(branch->getCond())) return;
      walk(branch->getThen(), [&](const Stmt& t) {
        const auto* assign = dyn_cast<BinaryOperator>(&t);
        const auto* zero = assign ? dyn_cast<IntegerLiteral>(strip(assign->getRHS())) : nullptr;
        if (assign && assign->getOpcode() == BO_Assign && zero && zero->getValue() == 0 &&
            cursors.count(declOf(assign->getLHS())))
          plan.wraps = true;
      });
    });
  auto insertAfter = [&](const Stmt& statement, const std::string& text) {
    SourceLocation end =
        Lexer::getLocForEndOfToken(sm.getExpansionLoc(statement.getEndLoc()), 0, sm, context.getLangOpts());
    // After the statement's `;` (its range stops before it).
    bool invalid = false;
    const char* at = sm.getCharacterData(end, &invalid);
    if (!invalid && *at == ';') end = end.getLocWithOffset(1);
    plan.edits.push_back({end, end, text});
  };
  // On a line of its own, indented like the statement; beside it when the
  // statement shares its line with what precedes it (`void reset() { ...; }`).
  auto statementText = [&](const Stmt& statement, const std::string& code) {
    auto [file, offset] = sm.getDecomposedLoc(sm.getExpansionLoc(statement.getBeginLoc()));
    llvm::StringRef text = sm.getBufferData(file);
    size_t lineStart = text.rfind('\n', offset == 0 ? 0 : offset - 1);
    lineStart = lineStart == llvm::StringRef::npos ? 0 : lineStart + 1;
    if (!text.slice(lineStart, offset).trim().empty()) return " " + code;
    return "\n" + edits::indentationAt(statement.getBeginLoc(), sm) + code;
  };
  auto spelledOrder = [&](const Stmt& near) {
    bool viaThis = false;
    walk(&near, [&](const Stmt& s) {
      if (const auto* m = dyn_cast<MemberExpr>(&s); m && m->getMemberDecl() == order && !m->isImplicitAccess())
        viaThis = true;
    });
    return (viaThis ? "this->" : "") + member;
  };

  if (!inPlace) {
    // A fresh order tensor each time: wrapped where it is made.
    for (const Write& w : orderWrites) {
      const Expr* rhs = nullptr;
      if (const auto* op = dyn_cast<CXXOperatorCallExpr>(w.call)) rhs = op->getArg(1);
      if (const auto* op = dyn_cast<BinaryOperator>(w.call)) rhs = op->getRHS();
      if (!rhs) continue;
      CharSourceRange range =
          Lexer::makeFileCharRange(CharSourceRange::getTokenRange(rhs->getSourceRange()), sm, context.getLangOpts());
      plan.edits.push_back({range.getBegin(), range.getBegin(), "fabric::shard("});
      plan.edits.push_back({range.getEnd(), range.getEnd(), fixedLength ? ", /*pad=*/true)" : ")"});
    }
  } else {
    // The full order moves to a member of its own; each method that makes
    // it gives `order` this rank's share afterwards.
    SourceLocation declEnd =
        Lexer::getLocForEndOfToken(sm.getExpansionLoc(order->getEndLoc()), 0, sm, context.getLangOpts());
    bool invalid = false;
    const char* at = sm.getCharacterData(declEnd, &invalid);
    if (invalid || *at != ';') return fail("declares `" + member + "` together with other members", defaultEdit);
    std::string type = textOf(order->getTypeSourceInfo()->getTypeLoc().getSourceRange(), context);
    plan.edits.push_back({declEnd.getLocWithOffset(1), declEnd.getLocWithOffset(1),
                          "\n" + edits::indentationAt(order->getBeginLoc(), sm) + type + " " + all +
                              ";  // every rank's order; " + member + " holds this rank's share"});
    // Rename the order in its writes.
    std::set<const Stmt*> renamed;
    auto renameIn = [&](const Stmt& s) {
      walk(&s, [&](const Stmt& node) {
        const auto* m = dyn_cast<MemberExpr>(&node);
        if (!m || m->getMemberDecl() != order || !renamed.insert(m).second) return;
        SourceLocation name = sm.getExpansionLoc(m->getMemberLoc());
        plan.edits.push_back({name, name.getLocWithOffset(member.size()), all});
      });
    };
    for (const Write& w : orderWrites) renameIn(isLoop(*w.statement) ? *w.statement : *w.call);
    if (orderInit) {
      SourceLocation name = sm.getExpansionLoc(orderInit->getMemberLocation());
      plan.edits.push_back({name, name.getLocWithOffset(member.size()), all});
    }
    // Where the share is taken: after the last write of each method's block
    // (in the block of the write; at the method's top level for a method
    // that does not read the order, so a reset() always re-shares).
    std::map<const CXXMethodDecl*, std::vector<const Write*>> perMethod;
    for (const Write& w : orderWrites) perMethod[w.method].push_back(&w);
    std::set<const CXXMethodDecl*> establishing;
    for (const auto& [method, list] : perMethod) establishing.insert(method);
    for (const auto& [method, list] : perMethod) {
      const Stmt* body = method->getBody();
      const Write* last = list.back();
      const Stmt* anchor = last->statement;
      if (!readers.count(method)) {
        // Up to the method's top level.
        const Stmt* current = anchor;
        for (int depth = 0; depth < 64 && current; ++depth) {
          const Stmt* parent = parentStmt(*current, context);
          if (!parent || parent == body) break;
          current = parent;
        }
        if (current) anchor = current;
      }
      // A constructor that calls a method making the order shares there.
      if (isa<CXXConstructorDecl>(method)) {
        bool delegates = false;
        walk(body, [&](const Stmt& s) {
          if (const auto* call = dyn_cast<CXXMemberCallExpr>(&s))
            if (const CXXMethodDecl* callee = call->getMethodDecl())
              if (const FunctionDecl* definition = callee->getDefinition())
                delegates = delegates || establishing.count(cast<CXXMethodDecl>(definition));
        });
        if (delegates) continue;
      }
      std::string spelled = spelledOrder(*anchor);
      std::string allSpelled = spelled.substr(0, spelled.size() - member.size()) + all;
      insertAfter(*anchor, statementText(*anchor, spelled + " = fabric::shard(" + allSpelled +
                                                      (fixedLength ? ", /*pad=*/true" : "") + ");"));
    }
    if (orderInit && perMethod.empty())
      return fail("makes `" + member + "` only in its constructor's member initializer", defaultEdit);
    // A constructor that only sizes the order in its initializer and makes
    // it through a method it calls is covered there; one that never makes it
    // in its body needs the share at its end.
  }
  // The epoch measured by the share.
  std::set<const Expr*> replaced;
  for (const Expr* use : lengthUses) {
    if (!replaced.insert(use).second) continue;
    CharSourceRange range =
        Lexer::makeFileCharRange(CharSourceRange::getTokenRange(use->getSourceRange()), sm, context.getLangOpts());
    plan.edits.push_back({range.getBegin(), range.getEnd(), lengthOfShare(*use)});
  }
  return plan;
}

// fabric.randperm / fabric.shuffle in place of the draws of a loop's
// permutations: every rank uses rank 0's.
llvm::SmallVector<transformer::Edit, 1> agreementEdits(const std::vector<dataloops::Agreement>& agreements,
                                                       const std::string& fabric,
                                                       const ast_matchers::MatchFinder::MatchResult& result) {
  llvm::SmallVector<transformer::Edit, 1> out;
  const SourceManager& sm = *result.SourceManager;
  for (const dataloops::Agreement& agreement : agreements) {
    const auto* call = dyn_cast<CallExpr>(agreement.call);
    if (!call) continue;
    const Expr* callee = call->getCallee()->IgnoreImplicit();
    CharSourceRange range = Lexer::makeFileCharRange(CharSourceRange::getTokenRange(callee->getSourceRange()), sm,
                                                     result.Context->getLangOpts());
    if (range.isInvalid()) continue;
    transformer::Edit edit;
    edit.Range = range;
    edit.Replacement = fabric + (agreement.stdShuffle ? ".shuffle" : ".randperm");
    out.push_back(edit);
  }
  return out;
}

}  // namespace fabricize::dataloops
