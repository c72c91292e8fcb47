// Precision: a migrated program runs its forwards (and the losses computed
// from them) under the precision chosen at run time (LT_PRECISION,
// fabric-run --precision), as Lightning's wrapped module does. C++ modules
// have no forward hook to wrap, so the migration opens the scope itself:
//   auto autocast = fabric.autocast();
// before the statement of the first forward of each block that no scope
// covers yet. The scope is a no-op under "32-true" (the 1-rank run stays
// bit-identical); fabric.backward() runs the backward pass outside it.
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

#include "clang/AST/RecursiveASTVisitor.h"

#include <map>
#include <set>

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;
using MatchResult = ast_matchers::MatchFinder::MatchResult;

namespace {

// A forward of a module: `model->forward(x)`, `model.forward(x)`,
// `model(x)` on a module holder, a method of the program's own module
// class (`vae->encode(x)`), or data_parallel(model, x), which
// fabric-data-parallel turns into a forward.
StatementMatcher forwardCall() {
  return callExpr(anyOf(
      cxxMemberCallExpr(
          callee(cxxMethodDecl(ofClass(moduleClass()), anyOf(hasName("forward"), unless(isLibTorchDeclaration()))))),
      cxxOperatorCallExpr(hasOverloadedOperatorName("()"),
                          callee(cxxMethodDecl(ofClass(cxxRecordDecl(hasName("::torch::nn::ModuleHolder")))))),
      callExpr(callee(functionDecl(hasName("::torch::nn::parallel::data_parallel"))))));
}

bool isModuleCode(const FunctionDecl& function, ASTContext& context) {
  return !ast_matchers::match(cxxMethodDecl(ofClass(moduleClass())), function, context).empty();
}

// A call of a helper of the program's that is handed a module and runs it:
// `evaluate(model, loader)`, `evaluator.run(loader)` on an object that
// holds the model, or `predict(x)` reading a global model. Its caller opens the scope for it; a helper
// that trains (it runs a backward pass, so it gets a Fabric) opens its own.
// A helper defined in another file counts when it is also handed data to
// run the module on (a tensor or a loader), not for `make_optimizer(model)`.
bool callsModuleHelper(const CallExpr& call, ASTContext& context) {
  const FunctionDecl* callee = call.getDirectCallee();
  if (!callee || context.getSourceManager().isInSystemHeader(callee->getLocation()) || isModuleCode(*callee, context) ||
      !ast_matchers::match(functionDecl(anyOf(isLibTorchDeclaration(), cxxMethodDecl(ofClass(fabricClass())))), *callee,
                           context)
           .empty())
    return false;
  bool handedModule = false, handedData = false;
  // A method of a class that holds the model (an Evaluator) runs its own.
  if (const auto* method = dyn_cast<CXXMethodDecl>(callee))
    for (const FieldDecl* field : method->getParent()->fields())
      handedModule = handedModule || isModuleType(field->getType().getNonReferenceType());
  auto data = qualType(anyOf(recordTypeOf(tensorClass()), loaderType()));
  for (const ParmVarDecl* parameter : callee->parameters()) {
    handedModule = handedModule || isModuleType(parameter->getType().getNonReferenceType());
    handedData =
        handedData || !ast_matchers::match(parmVarDecl(hasType(valueOrReference(data))), *parameter, context).empty();
  }
  const FunctionDecl* definition = nullptr;
  const bool defined = callee->hasBody(definition);
  // A helper of this file that runs a model the program keeps at namespace
  // scope (`Net model;` beside main): handed nothing, it is known by what
  // its forwards run.
  if (!handedModule && defined) {
    auto global = declRefExpr(to(varDecl(hasGlobalStorage()).bind("global")));
    for (const auto& found :
         ast_matchers::match(stmt(forEachDescendant(callExpr(forwardCall(), hasDescendant(global)))),
                             *definition->getBody(), context)) {
      const auto* variable = found.getNodeAs<VarDecl>("global");
      handedModule = handedModule || (variable && isModuleType(variable->getType().getNonReferenceType()));
    }
  }
  if (!handedModule) return false;
  if (!defined) return handedData;
  const Stmt& body = *definition->getBody();
  return !ast_matchers::match(stmt(hasDescendant(forwardCall())), body, context).empty() &&
         ast_matchers::match(stmt(hasDescendant(backwardCall())), body, context).empty();
}

// `<var> = fabric.autocast()`: a scope already open (migrated code).
StatementMatcher autocastScope() {
  return declStmt(has(varDecl(hasInitializer(
      hasDescendant(cxxMemberCallExpr(callee(cxxMethodDecl(hasName("autocast"), ofClass(fabricClass())))))))));
}

// Where the scopes go in one function (lambdas in it included): for each
// forward that no open scope covers, the statement of its innermost block
// to open one before.
struct AutocastPlan {
  std::map<const Expr*, const Stmt*> opensBefore;
  std::string guardName = "autocast";
};

class AutocastPlanner : public RecursiveASTVisitor<AutocastPlanner> {
 public:
  AutocastPlanner(ASTContext& context, AutocastPlan& plan) : context_(context), plan_(plan) {}

  bool shouldVisitTemplateInstantiations() const { return true; }
  bool shouldVisitLambdaBodies() const { return true; }

  bool TraverseCompoundStmt(CompoundStmt* block, DataRecursionQueue* = nullptr) {
    frames_.back().push_back(Block{block, nullptr, false});
    for (Stmt* child : block->body()) {
      frames_.back().back().current = child;
      if (!ast_matchers::match(autocastScope(), *child, context_).empty()) frames_.back().back().covered = true;
      TraverseStmt(child);
    }
    frames_.back().pop_back();
    return true;
  }

  // A lambda's body runs when it is called, not where it is written: the
  // scopes open around it do not cover it. (A lambda that captures by name
  // gets the Fabric added to its captures with the scope: Edits.h.)
  bool TraverseLambdaExpr(LambdaExpr* lambda, DataRecursionQueue* = nullptr) {
    frames_.push_back({});
    TraverseStmt(lambda->getBody());
    frames_.pop_back();
    return true;
  }

  bool VisitCallExpr(CallExpr* call) {
    if (frames_.back().empty() ||
        (ast_matchers::match(forwardCall(), *call, context_).empty() && !callsModuleHelper(*call, context_)))
      return true;
    std::vector<Block>& blocks = frames_.back();
    for (const Block& block : blocks)
      if (block.covered) return true;
    // A declaration cannot go between a case label and its statement (a
    // jump would bypass it): the scope opens before the switch.
    size_t at = blocks.size() - 1;
    while (at > 0 && isa<SwitchCase, LabelStmt>(blocks[at].current)) --at;
    if (isa<SwitchCase, LabelStmt>(blocks[at].current)) return true;
    plan_.opensBefore[call] = blocks[at].current;
    blocks[at].covered = true;
    return true;
  }

  void plan(const FunctionDecl& function) {
    frames_.assign(1, {});
    TraverseStmt(function.getBody());
  }

 private:
  struct Block {
    const CompoundStmt* block;
    const Stmt* current;  // the statement of the block being traversed
    bool covered;         // a scope is open from an earlier statement on
  };
  ASTContext& context_;
  AutocastPlan& plan_;
  std::vector<std::vector<Block>> frames_;  // one per function or lambda body
};

AutocastPlan planFor(const Expr& forward, ASTContext& context) {
  AutocastPlan plan;
  const FunctionDecl* function = enclosingFunction(DynTypedNode::create(forward), context);
  // A module's own code (its forward calling its layers) runs inside the
  // scope of whoever calls the module.
  if (!function || !function->hasBody() || isModuleCode(*function, context)) return plan;
  AutocastPlanner(context, plan).plan(*function);
  auto named =
      ast_matchers::match(stmt(hasDescendant(varDecl(hasName("autocast"), unless(hasParent(autocastScope()))))),
                          *function->getBody(), context);
  if (!named.empty()) plan.guardName = "fabric_autocast";
  return plan;
}

AST_MATCHER(CallExpr, isModuleHelperCall) { return callsModuleHelper(Node, Finder->getASTContext()); }

AST_MATCHER(Expr, opensAutocastScope) { return planFor(Node, Finder->getASTContext()).opensBefore.count(&Node) > 0; }

// `auto autocast = <fabric>.autocast();` before the statement the plan
// chose: on a line of its own, indented like it, or in front of it when
// the statement shares its line with what precedes it.
EditGenerator openScopeBeforeStatement() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* forward = result.Nodes.getNodeAs<Expr>("forward");
    AutocastPlan plan = planFor(*forward, *result.Context);
    auto place = plan.opensBefore.find(forward);
    if (place == plan.opensBefore.end()) return llvm::SmallVector<Edit, 1>();
    // Worth a Fabric only where the function has or gets one anyway: a
    // helper without one runs in the scope its caller opens for it.
    std::string statement = "auto " + plan.guardName + " = " + edits::fabricNameWhereMigrated(result) + ".autocast();";
    Edit edit = edits::statementBefore(*place->second, statement, *result.SourceManager);
    return llvm::SmallVector<Edit, 1>{edit};
  };
}

}  // namespace

Rule makeAutocastRule() {
  auto forward = expr(anyOf(forwardCall(), callExpr(isModuleHelperCall())), inFabricScope());
  return {"fabric-autocast", "+",
          "Open `auto autocast = fabric.autocast();` before the first forward of each block (model->forward(x), "
          "model(x), data_parallel(...)) that no scope covers yet, outside the modules' own code: the forward and "
          "the loss computed from it run under the precision chosen at run time (bf16-mixed, 16-mixed on CUDA); "
          "under 32-true the scope does nothing.",
          RuleKind::Rewrite,
          makeRule(expr(forward, opensAutocastScope()).bind("forward"), openScopeBeforeStatement(),
                   cat("run the forward and its loss under the precision chosen at run time"))};
}

}  // namespace fabricize
