// Step 3: fabric.setup(model, optimizers...) once the optimizers exist.
// A model trained in phases by several optimizers (LoRA adapters first, then
// every parameter) is set up before the first phase's first step, with the
// optimizers made so far; a later phase's optimizer gets
// fabric.setup_optimizer(optimizer) where it is made.
//
// Optimizers come by value, through unique_ptr/shared_ptr (to their own
// class or to torch::optim::Optimizer), as class members, and over parameter
// groups (Optimizers.h finds the models whose parameters they get). The
// models and optimizers that share parameters are set up together, right
// after the last of them is created: `fabric.setup(model, opt)`, or for an
// optimizer over two models `fabric.setup(encoder); fabric.setup(decoder, opt);`.
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "rule-helpers/Optimizers.h"
#include "RuleFactories.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/Lex/Lexer.h"
#include "clang/Tooling/Transformer/SourceCode.h"

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;

namespace {

using MatchResult = ast_matchers::MatchFinder::MatchResult;

// The models and optimizers `fabric.setup(...)` calls in `function` name.
struct ExistingSetups {
  std::vector<const ValueDecl*> models, optimizers;
};
ExistingSetups setupsIn(const FunctionDecl& function) {
  ExistingSetups found;
  std::function<void(const Stmt*)> walk = [&](const Stmt* s) {
    if (!s) return;
    if (const auto* call = dyn_cast<CXXMemberCallExpr>(s)) {
      const CXXMethodDecl* method = call->getMethodDecl();
      bool setup = method && match::plainName(method) == "setup";
      bool setupOptimizer = method && match::plainName(method) == "setup_optimizer";
      if ((setup || setupOptimizer) && method->getParent()->getQualifiedNameAsString() == "fabric::Fabric" &&
          call->getNumArgs() > 0) {
        if (setup)
          if (const ValueDecl* model = optimizers::rootModule(*call->getArg(0)).decl) found.models.push_back(model);
        for (unsigned i = setup ? 1 : 0; i < call->getNumArgs(); ++i) {
          const Expr* argument = call->getArg(i)->IgnoreParenImpCasts();
          if (const auto* deref = dyn_cast<UnaryOperator>(argument))
            argument = deref->getSubExpr()->IgnoreParenImpCasts();
          if (const auto* deref = dyn_cast<CXXOperatorCallExpr>(argument); deref && deref->getOperator() == OO_Star)
            argument = deref->getArg(0)->IgnoreParenImpCasts();
          if (const auto* ref = dyn_cast<DeclRefExpr>(argument)) found.optimizers.push_back(ref->getDecl());
          if (const auto* member = dyn_cast<MemberExpr>(argument)) found.optimizers.push_back(member->getMemberDecl());
        }
      }
    }
    for (const Stmt* child : s->children()) walk(child);
  };
  walk(function.getBody());
  return found;
}

bool contains(const std::vector<const ValueDecl*>& decls, const ValueDecl* decl) {
  return std::find(decls.begin(), decls.end(), decl) != decls.end();
}

// The groups a match sets up: for a statement, the group of the optimizer it
// creates when it is that group's last creation; for a constructor, every
// group whose last creation is a member initialiser. Groups a setup call
// already names (migrated code) are left alone.
struct Context {
  const FunctionDecl* function = nullptr;
  std::vector<optimizers::Creation> creations;
  std::vector<optimizers::SetupGroup> groups;
  // Groups set up here, and how many of their creations the setup names.
  std::vector<std::pair<const optimizers::SetupGroup*, size_t>> toSetUp;
  // Optimizers of a group set up earlier, made here: setup_optimizer.
  std::vector<const optimizers::Creation*> laterOptimizers;
};

// Where a group's setup goes: after the first of its creations whose
// optimizers are used before the next creation (a first training phase
// steps optimizer A before optimizer B exists: each must be set up before its
// first step); the creations after it are set up on their own, each where it
// is made. Without such a use: after the last creation, all together.
size_t setupCreation(const optimizers::SetupGroup& group, const FunctionDecl& function, ASTContext& context) {
  const SourceManager& sm = context.getSourceManager();
  auto before = [&](SourceLocation a, SourceLocation b) {
    return sm.isBeforeInTranslationUnit(sm.getExpansionLoc(a), sm.getExpansionLoc(b));
  };
  for (size_t k = 0; k + 1 < group.creations.size(); ++k) {
    const optimizers::Creation& next = *group.creations[k + 1];
    if (!next.statement) return group.creations.size() - 1;  // member initialisers: all at once
    bool used = false;
    std::function<void(const Stmt*)> walk = [&](const Stmt* s) {
      if (!s || used) return;
      for (size_t i = 0; i <= k; ++i)
        if (s == group.creations[i]->statement) return;  // the creation itself
      const ValueDecl* named = nullptr;
      if (const auto* ref = dyn_cast<DeclRefExpr>(s)) named = ref->getDecl();
      if (const auto* member = dyn_cast<MemberExpr>(s)) named = member->getMemberDecl();
      if (named && before(group.creations[k]->at, s->getBeginLoc()) && before(s->getBeginLoc(), next.at))
        for (size_t i = 0; i <= k; ++i) used = used || named == group.creations[i]->handle;
      for (const Stmt* child : s->children()) walk(child);
    };
    walk(function.getBody());
    if (used) return k;
  }
  return group.creations.size() - 1;
}

void contextOf(const MatchResult& result, Context& out) {
  const auto* statement = result.Nodes.getNodeAs<Stmt>("creation");
  const auto* constructor = result.Nodes.getNodeAs<CXXConstructorDecl>("ctor");
  out.function =
      constructor ? constructor : match::enclosingFunction(DynTypedNode::create(*statement), *result.Context);
  if (!out.function) return;
  out.creations = optimizers::creationsIn(*out.function, *result.Context);
  out.groups = optimizers::setupGroups(out.creations);
  ExistingSetups existing = setupsIn(*out.function);
  for (const optimizers::SetupGroup& group : out.groups) {
    bool setUp = false;
    for (const optimizers::Model& model : group.models) setUp = setUp || contains(existing.models, model.decl);
    if (setUp) continue;
    size_t at = setupCreation(group, *out.function, *result.Context);
    const optimizers::Creation* setup = group.creations[at];
    if (constructor ? setup->initializer != nullptr : setup->statement == statement)
      out.toSetUp.push_back({&group, at + 1});
    for (size_t later = at + 1; later < group.creations.size(); ++later)
      if (!constructor && group.creations[later]->statement == statement &&
          !contains(existing.optimizers, group.creations[later]->handle))
        out.laterOptimizers.push_back(group.creations[later]);
  }
}

llvm::SmallVector<Edit, 1> insertion(SourceLocation at, std::string text) {
  Edit edit;
  edit.Range = CharSourceRange::getCharRange(at, at);
  edit.Replacement = std::move(text);
  return {edit};
}

// After the last creation of a group that no setup call names yet.
EditGenerator setupAfterLastCreation() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    Context context;
    contextOf(result, context);
    if (context.toSetUp.empty() && context.laterOptimizers.empty()) return llvm::SmallVector<Edit, 1>();
    auto statements = [&](const std::string& indent) {
      std::string text;
      for (const auto& [group, creations] : context.toSetUp)
        text += "\n" + indent +
                optimizers::setupCalls(*group, creations, edits::fabricNameAt(result), indent, *result.Context);
      for (const optimizers::Creation* later : context.laterOptimizers)
        text += "\n" + indent + edits::fabricNameAt(result) + ".setup_optimizer(" + optimizers::optimizerText(*later) +
                ");";
      return text;
    };
    const SourceManager& sm = *result.SourceManager;
    const optimizers::Creation* last =
        context.toSetUp.empty() ? context.laterOptimizers.front()
                                : context.toSetUp.front().first->creations[context.toSetUp.front().second - 1];
    if (!last->place) {  // a member initialiser: last thing in the constructor's body
      const auto* body = dyn_cast_or_null<CompoundStmt>(context.function->getBody());
      if (!body) return llvm::SmallVector<Edit, 1>();
      // The body's first statement's indentation, else the constructor's plus two.
      std::string indent = body->body_empty() ? edits::indentationAt(context.function->getBeginLoc(), sm) + "  "
                                              : edits::indentationAt(body->body_front()->getBeginLoc(), sm);
      if (body->body_empty()) {  // `{}`: the statements get their own lines, the brace its own
        std::string outer = indent.size() >= 2 ? indent.substr(0, indent.size() - 2) : "";
        Edit edit;
        edit.Range = CharSourceRange::getCharRange(body->getLBracLoc().getLocWithOffset(1), body->getRBracLoc());
        edit.Replacement = statements(indent) + "\n" + outer;
        return llvm::SmallVector<Edit, 1>{edit};
      }
      // Last in the body, on its own line before the closing brace: what the
      // constructor does to the model (a pretrained encoder loaded, frozen)
      // comes before the Fabric takes it. (Not after the last statement,
      // which another rule may remove: `model_->to(device)`.)
      SourceLocation close = sm.getExpansionLoc(body->getRBracLoc());
      auto [file, offset] = sm.getDecomposedLoc(close);
      llvm::StringRef text = sm.getBufferData(file);
      size_t lineStart = text.rfind('\n', offset);
      lineStart = lineStart == llvm::StringRef::npos ? 0 : lineStart + 1;
      if (text.slice(lineStart, offset).trim().empty()) {
        std::string lines = statements(indent);  // "\n<indent>setup;" per group
        return insertion(close.getLocWithOffset(static_cast<int>(lineStart) - static_cast<int>(offset)),
                         lines.substr(1) + "\n");
      }
      return insertion(close, statements(indent) + "\n" + edits::indentationAt(context.function->getBeginLoc(), sm));
    }
    CharSourceRange place = tooling::getExtendedRange(*last->place, tok::semi, *result.Context);
    SourceLocation end = place.getEnd();
    if (place.isTokenRange())
      end = Lexer::getLocForEndOfToken(sm.getExpansionLoc(end), 0, sm, result.Context->getLangOpts());
    std::string indent = edits::indentationAt(last->place->getBeginLoc(), sm);
    return insertion(sm.getExpansionLoc(end), statements(indent));
  };
}

// Whether the matched creation is an optimizer over a set-up model that no
// setup call names (added by hand after a migration, say).
AST_MATCHER(Stmt, isForgottenOptimizer) {
  const FunctionDecl* function = match::enclosingFunction(DynTypedNode::create(Node), Finder->getASTContext());
  if (!function) return false;
  std::vector<optimizers::Creation> creations = optimizers::creationsIn(*function, Finder->getASTContext());
  const optimizers::Creation* creation = optimizers::creationOf(creations, &Node);
  if (!creation) return false;
  ExistingSetups existing = setupsIn(*function);
  bool modelSetUp = false;
  for (const optimizers::Model& model : creation->models)
    modelSetUp = modelSetUp || contains(existing.models, model.decl);
  return modelSetUp && !contains(existing.optimizers, creation->handle);
}

// An optimizer created here over models fabricize cannot find (its
// parameters come from a function that is handed no model, or from tensors
// gathered elsewhere): no setup would be inserted for it, and each rank
// would train its own copy. Aliases of other optimizers and null pointers
// are not creations.
AST_MATCHER(Stmt, isUntracedOptimizerCreation) {
  const FunctionDecl* function = match::enclosingFunction(DynTypedNode::create(Node), Finder->getASTContext());
  if (!function) return false;
  optimizers::OptimizerAssignment assignment = optimizers::optimizerAssignment(Node);
  if (!assignment.handle) return false;
  // A reference or raw pointer is bound to an optimizer made elsewhere
  // unless it is `new`-ed here.
  QualType type = assignment.handle->getType();
  if (type->isReferenceType()) return false;
  const Expr* value = assignment.value->IgnoreParenImpCasts();
  if (type->isPointerType() && !isa<CXXNewExpr>(value)) return false;
  if (const auto* construct = dyn_cast<CXXConstructExpr>(value); construct && construct->getNumArgs() == 0)
    return false;  // `std::unique_ptr<Optimizer> optimizer{}`
  // What the handle is made from, through conversions and temporaries:
  // `nullptr`, or `trainer.optimizer()` (a getter hands out an optimizer made
  // elsewhere), is no new optimizer.
  const Expr* source = value->IgnoreUnlessSpelledInSource();
  if (isa<CXXMemberCallExpr>(source) ||
      source->isNullPointerConstant(Finder->getASTContext(), Expr::NPC_ValueDependentIsNotNull) ||
      optimizers::refersToOptimizer(*value))
    return false;
  if (optimizers::creationOf(optimizers::creationsIn(*function, Finder->getASTContext()), &Node)) return false;
  return !contains(setupsIn(*function).optimizers, assignment.handle);
}

// `fabric.setup_optimizer(optimizer);` on the line after an optimizer whose
// model fabricize cannot see: the runtime synchronises the optimizer's
// parameters as they are (a model's, or loose tensors of a class that holds
// its modules by raw pointers).
EditGenerator setupOptimizerAfterCreation() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* statement = result.Nodes.getNodeAs<Stmt>("creation");
    optimizers::OptimizerAssignment assignment = optimizers::optimizerAssignment(*statement);
    if (!assignment.handle) return llvm::SmallVector<Edit, 1>();
    QualType type = assignment.handle->getType();
    bool pointerLike =
        type->isPointerType() || match::heldBy(type, "std::unique_ptr") || match::heldBy(type, "std::shared_ptr");
    const SourceManager& sm = *result.SourceManager;
    CharSourceRange place = tooling::getExtendedRange(*statement, tok::semi, *result.Context);
    SourceLocation end = place.getEnd();
    if (place.isTokenRange())
      end = Lexer::getLocForEndOfToken(sm.getExpansionLoc(end), 0, sm, result.Context->getLangOpts());
    std::string indent = edits::indentationAt(statement->getBeginLoc(), sm);
    return insertion(sm.getExpansionLoc(end), "\n" + indent + edits::fabricNameAt(result) + ".setup_optimizer(" +
                                                  (pointerLike ? "*" : "") + assignment.handle->getName().str() + ");");
  };
}

// A statement that may create an optimizer (cheap checks first; the
// generator then finds the models).
StatementMatcher optimizerCreationCandidate() {
  auto handle = expr(hasType(optimizerHandleType()));
  return stmt(anyOf(declStmt(has(varDecl(hasType(optimizerHandleType()), hasInitializer(expr())))),
                    binaryOperator(isAssignmentOperator(), hasLHS(handle)),
                    cxxOperatorCallExpr(hasOverloadedOperatorName("="), hasArgument(0, handle)),
                    cxxMemberCallExpr(callee(cxxMethodDecl(hasName("reset"))), on(handle), argumentCountIs(1))));
}

AST_MATCHER(Stmt, createsOptimizer) {
  const FunctionDecl* function = match::enclosingFunction(DynTypedNode::create(Node), Finder->getASTContext());
  if (!function) return false;
  return optimizers::creationOf(optimizers::creationsIn(*function, Finder->getASTContext()), &Node) != nullptr;
}

// A constructor's implicit initialiser of a member that has a default
// member initialiser (`Adam optimizer_{model_->parameters()}` in the class).
AST_MATCHER(CXXCtorInitializer, fromDefaultMemberInitializer) {
  return !Node.isWritten() && Node.getInit() && isa<CXXDefaultInitExpr>(Node.getInit()->IgnoreImplicit());
}

// An aggregate (no constructor, all public) whose default member
// initialisers make an optimizer over its model: there is no constructor to
// set them up in, and a brace list may give any member.
AST_MATCHER(CXXRecordDecl, isAggregateMakingOptimizer) {
  return Node.hasDefinition() && Node.isAggregate() &&
         !optimizers::memberInitializerCreations(Node, Finder->getASTContext()).empty();
}

}  // namespace

Rule makeSetupRule() {
  auto creation = stmt(optimizerCreationCandidate(), inFabricScope(), createsOptimizer()).bind("creation");
  // A constructor that makes an optimizer member: in its initialisers, or
  // through the member's default initialiser (`Adam optimizer_{...}`).
  auto memberCreation =
      cxxConstructorDecl(
          isDefinition(), unless(isImplicit()), unless(isDefaulted()),
          hasAnyConstructorInitializer(cxxCtorInitializer(anyOf(isWritten(), fromDefaultMemberInitializer()),
                                                          forField(hasType(optimizerHandleType())))))
          .bind("ctor");
  auto explain = cat("set up the model and its optimizers with the Fabric");
  return {
      "fabric-setup", "3",
      "Insert fabric.setup(model, optimizers...) after the last optimizer over the model is "
      "created (by value, through a smart pointer, as a member, over parameter groups; a "
      "member's default initialiser counts as its constructor's, and a class with no "
      "constructor is set up in the one fabric-thread-fabric gives it): it "
      "moves the model to the device, broadcasts rank 0's weights and wraps it for the "
      "strategy. An optimizer whose model cannot be found (made by a factory, over the parameters a "
      "class gathers from modules it holds by pointer) gets fabric.setup_optimizer(optimizer), "
      "which synchronises its parameters themselves. An optimizer over a set-up model that the "
      "setup does not name is reported, and so is an aggregate whose default member "
      "initialisers make an optimizer (no constructor to set it up in).",
      RuleKind::Rewrite,
      applyFirst<std::string>({
          makeRule(stmt(creation, isForgottenOptimizer()), noopEdit(node("creation")),
                   cat("optimizer over a set-up model that fabric.setup does not name: pass it "
                       "too (fabric.setup(model, optimizer, ...), or fabric.setup_optimizer(optimizer) "
                       "for one made after the setup) so the strategy and the precision see its steps")),
          makeRule(creation, setupAfterLastCreation(), explain),
          makeRule(stmt(optimizerCreationCandidate(), inFabricScope(), isUntracedOptimizerCreation(),
                        anyOf(hasParent(compoundStmt()), hasParent(exprWithCleanups(hasParent(compoundStmt())))))
                       .bind("creation"),
                   setupOptimizerAfterCreation(),
                   cat("no model's parameters() reach this optimizer here (a factory made it, or a class "
                       "that holds its modules by pointer gathers them): the Fabric synchronises the "
                       "optimizer's parameters themselves")),
          makeRule(stmt(optimizerCreationCandidate(), inFabricScope(), isUntracedOptimizerCreation()).bind("creation"),
                   noopEdit(node("creation")),
                   cat("fabricize cannot tell which model this optimizer trains (no model's "
                       "parameters() reach it here), so it sets up none: add "
                       "fabric.setup_optimizer(optimizer) after it, or each rank trains its own copy")),
          makeRule(memberCreation, setupAfterLastCreation(), explain),
          makeRule(cxxRecordDecl(isDefinition(), unless(isExpansionInSystemHeader()), unless(isLibTorchDeclaration()),
                                 isAggregateMakingOptimizer())
                       .bind("aggregate"),
                   noopEdit(node("aggregate")),
                   cat("this aggregate's default member initialisers make an optimizer over its model, and it has "
                       "no constructor to set them up in: call fabric.setup(<object>.model, <object>.optimizer) "
                       "where it is made (or give it a constructor), or each rank trains its own copy")),
      })};
}

}  // namespace fabricize
