// Checkpoints go through the Fabric: every rank calls, rank 0 writes
// atomically, so ranks do not fight over one file.
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "rule-helpers/Metrics.h"
#include "RuleFactories.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

namespace {

// A model or an optimizer, however held: the training state a checkpoint
// holds. A tensor (a data file, a cache of tokens, a preview image) is data.
AST_MATCHER(clang::Expr, isTrainingState) {
  clang::QualType type = Node.getType();
  return isModuleType(type) || isOptimizerHandle(type);
}

AST_MATCHER(clang::Expr, isPerRankValue) { return metrics::isPerRankValue(Node, Finder->getASTContext()); }

// `archive` when `expr` names a default-constructed local archive variable.
const clang::VarDecl* localArchive(const clang::Expr* expr, llvm::StringRef archiveClass) {
  const auto* reference = expr ? llvm::dyn_cast<clang::DeclRefExpr>(expr->IgnoreParenImpCasts()) : nullptr;
  const auto* archive = reference ? llvm::dyn_cast<clang::VarDecl>(reference->getDecl()) : nullptr;
  if (!archive || !archive->isLocalVarDecl() || archive->isStaticLocal() || archive->getType()->isReferenceType())
    return nullptr;
  const clang::CXXRecordDecl* record = archive->getType()->getAsCXXRecordDecl();
  if (!record || record->getQualifiedNameAsString() != archiveClass) return nullptr;
  const auto* construction = llvm::dyn_cast_or_null<clang::CXXConstructExpr>(archive->getInit());
  return construction && construction->getNumArgs() == 0 ? archive : nullptr;
}

// `method(path, ...)`: its first parameter is an std::string (the overload
// that names a file, not a stream or a buffer).
bool takesPathFirst(const clang::CXXMethodDecl* method, llvm::StringRef name) {
  if (!method || match::plainName(method) != name || method->getNumParams() < 1) return false;
  const clang::CXXRecordDecl* first = method->getParamDecl(0)->getType().getNonReferenceType()->getAsCXXRecordDecl();
  return first && first->isInStdNamespace() && first->getName() == "basic_string";
}

// How many expressions in `code` name `variable`.
int namesOf(const clang::VarDecl& variable, const clang::Stmt& code) {
  int names = 0;
  if (const auto* reference = llvm::dyn_cast<clang::DeclRefExpr>(&code)) names += reference->getDecl() == &variable;
  for (const clang::Stmt* child : code.children())
    if (child) names += namesOf(variable, *child);
  return names;
}

// The call `statement` is, when it is one (`archive.load_from(path);`).
const clang::CXXMemberCallExpr* memberCallStatement(const clang::Stmt* statement) {
  if (const auto* cleanups = llvm::dyn_cast_or_null<clang::ExprWithCleanups>(statement))
    statement = cleanups->getSubExpr();
  return llvm::dyn_cast_or_null<clang::CXXMemberCallExpr>(statement);
}

// `model->load(archive)` / `optimizer.save(archive)`: binds the model or
// optimizer as spelled to "value", and "dereference" when the Fabric takes
// it as `*value` (through a raw pointer or a smart pointer to anything but a
// module: torch::save and fabric.load take holders and shared_ptr<Module>
// as they are, an optimizer only as itself).
bool bindsTrainingStateOf(const clang::CXXMemberCallExpr& call, llvm::StringRef method,
                          clang::ast_matchers::internal::BoundNodesTreeBuilder& builder) {
  const clang::CXXMethodDecl* callee = call.getMethodDecl();
  if (!callee || match::plainName(callee) != method) return false;
  // LibTorch's own save/load: a module's override (reading a version
  // field too) is the program's, which fabric.load would not call.
  const clang::CXXRecordDecl* owner = callee->getParent();
  if (!llvm::StringRef(owner->getQualifiedNameAsString()).starts_with("torch::")) return false;
  if (!derivesFrom(*owner, "torch::nn::Module") && !derivesFrom(*owner, "torch::optim::Optimizer")) return false;
  const clang::Expr* object = call.getImplicitObjectArgument()->IgnoreParenImpCasts();
  bool dereference = false;
  if (const auto* arrow = llvm::dyn_cast<clang::CXXOperatorCallExpr>(object);
      arrow && arrow->getOperator() == clang::OO_Arrow) {
    object = arrow->getArg(0)->IgnoreParenImpCasts();
    dereference = !isModuleType(object->getType()) || isUniquePointerToModule(object->getType());
  } else if (object->getType()->isPointerType()) {
    dereference = true;
  }
  // A variable or a member, spelled: not `this` (a module loading itself),
  // not a temporary (`trainer.model()->load(a)`), not a const object, and
  // nothing whose evaluation has effects of its own.
  if (!llvm::isa<clang::DeclRefExpr>(object) && !llvm::isa<clang::MemberExpr>(object)) return false;
  if (const auto* member = llvm::dyn_cast<clang::MemberExpr>(object);
      member && member->getBase()->IgnoreParenImpCasts()->getStmtClass() != clang::Stmt::CXXThisExprClass &&
      !llvm::isa<clang::DeclRefExpr>(member->getBase()->IgnoreParenImpCasts()))
    return false;
  if (object->getType().getNonReferenceType().isConstQualified()) return false;
  builder.setBinding("value", clang::DynTypedNode::create(*object));
  if (dereference) builder.setBinding("dereference", clang::DynTypedNode::create(*object));
  return true;
}

// The second statement of an archive's only trip between a file and a model
// or an optimizer: a local `torch::serialize::InputArchive archive;` read by
// `archive.load_from(path);` and then handed to `model->load(archive);`
// (the matched call, `archiveIsArgument`), or an OutputArchive filled by
// `model->save(archive);` and then written by `archive.save_to(path);` (the
// matched call). The two statements are adjacent in one block after the
// declaration, and nothing else names the archive: the three become one
// fabric.load/fabric.save with the same path and object. Binds "value",
// "path", "firstOfTrip" and "archiveDeclaration".
AST_MATCHER_P(clang::CXXMemberCallExpr, endsArchiveTrip, bool, archiveIsArgument) {
  clang::ASTContext& context = Finder->getASTContext();
  const clang::Expr* archiveUse =
      archiveIsArgument ? (Node.getNumArgs() == 1 ? Node.getArg(0) : nullptr) : Node.getImplicitObjectArgument();
  const clang::VarDecl* archive = localArchive(
      archiveUse, archiveIsArgument ? "torch::serialize::InputArchive" : "torch::serialize::OutputArchive");
  if (!archive) return false;
  // The statement the call is, and the block it is in.
  clang::DynTypedNode statement = clang::DynTypedNode::create(Node);
  auto parents = context.getParents(statement);
  if (parents.size() == 1 && parents[0].get<clang::ExprWithCleanups>()) {
    statement = parents[0];
    parents = context.getParents(statement);
  }
  const auto* block = parents.size() == 1 ? parents[0].get<clang::CompoundStmt>() : nullptr;
  if (!block) return false;
  const clang::Stmt* previous = nullptr;
  const clang::DeclStmt* declaration = nullptr;
  for (const clang::Stmt* child : block->body()) {
    if (child == statement.get<clang::Stmt>()) break;
    if (const auto* decl = llvm::dyn_cast<clang::DeclStmt>(child);
        decl && decl->isSingleDecl() && decl->getSingleDecl() == archive)
      declaration = decl;
    previous = child;
  }
  const clang::CXXMemberCallExpr* first = memberCallStatement(previous);
  if (!declaration || !first || previous == declaration) return false;
  // Written out, not by a macro: the three statements are edited together.
  if (declaration->getBeginLoc().isMacroID() || previous->getBeginLoc().isMacroID() || Node.getBeginLoc().isMacroID())
    return false;
  if (archiveIsArgument) {
    // archive.load_from(path[, device]): the path overload.
    if (!takesPathFirst(first->getMethodDecl(), "load_from") ||
        localArchive(first->getImplicitObjectArgument(), "torch::serialize::InputArchive") != archive)
      return false;
    if (!bindsTrainingStateOf(Node, "load", *Builder)) return false;
    Builder->setBinding("path", clang::DynTypedNode::create(*first->getArg(0)));
  } else {
    if (!takesPathFirst(Node.getMethodDecl(), "save_to") || first->getNumArgs() != 1 ||
        localArchive(first->getArg(0), "torch::serialize::OutputArchive") != archive ||
        !bindsTrainingStateOf(*first, "save", *Builder))
      return false;
    Builder->setBinding("path", clang::DynTypedNode::create(*Node.getArg(0)));
  }
  // Named nowhere else in the function: an archive that also carries an
  // epoch or a second module keeps its own save_to/load_from.
  const clang::FunctionDecl* function = enclosingFunction(statement, context);
  if (!function || !function->getBody()) return false;
  if (namesOf(*archive, *function->getBody()) != 2) return false;
  // The path moves into one call with the object: neither may have effects
  // whose order would change (`load_from(paths[i]); models[i++]->load(a)`).
  const clang::Expr* pathExpr = archiveIsArgument ? first->getArg(0) : Node.getArg(0);
  const clang::Expr* objectExpr =
      archiveIsArgument ? Node.getImplicitObjectArgument() : first->getImplicitObjectArgument();
  if (pathExpr->HasSideEffects(context, /*IncludePossibleEffects=*/false) ||
      objectExpr->HasSideEffects(context, /*IncludePossibleEffects=*/false))
    return false;
  Builder->setBinding("firstOfTrip", clang::DynTypedNode::create(*previous));
  Builder->setBinding("archiveDeclaration", clang::DynTypedNode::create(*declaration));
  return true;
}

}  // namespace

Rule makeCheckpointRule() {
  auto call = [](llvm::StringRef function) {
    return callExpr(callee(functionDecl(hasName(function))), argumentCountIs(2), hasArgument(0, expr().bind("value")),
                    hasArgument(1, expr().bind("path")), inFabricScope())
        .bind("call");
  };
  auto save = cat(edits::fabricMember("save("), node("path"), ", ", node("value"), ")");
  // A save that only some ranks reach (`if (avg_reward > best) torch::save(...)`
  // on this rank's reward) cannot be the collective fabric.save: rank 0
  // writes when its own condition holds.
  auto perRankBranch = hasAncestor(ifStmt(hasCondition(expr(isPerRankValue()).bind("condition"))));
  auto rankZeroAlone = flatten(insertBefore(node("call"), cat("if (", edits::fabricMember("is_global_zero()"), ") ")),
                               noopEdit(node("condition")));
  auto perRankSave =
      cat("this save is reached only on ranks where this condition holds, and it differs "
          "between ranks (computed from each rank's own batches): it cannot be the collective "
          "fabric.save, so rank 0 writes when its own condition holds; to decide on all the "
          "data, all-reduce the value first (`value = fabric.all_reduce(value, "
          "fabric::ReduceOp::Mean);`) and call fabric.save on every rank");
  // archive.save_to(path) on a serialize::OutputArchive (a model saved
  // through module->save(archive)): without a Fabric every rank would write
  // the same file at once. save_to(stream) writes where its stream points
  // (an std::ofstream is fabric-rank-zero-file's, std::cout
  // fabric-rank-zero-print's).
  auto archive_save_to = [](auto object) {
    auto string_type = qualType(hasCanonicalType(hasDeclaration(recordDecl(hasName("::std::basic_string")))));
    auto save_to_path = cxxMethodDecl(hasName("save_to"), ofClass(hasName("::torch::serialize::OutputArchive")),
                                      hasParameter(0, hasType(references(string_type))));
    return cxxMemberCallExpr(callee(save_to_path), on(object), hasArgument(0, expr().bind("path")), inFabricScope())
        .bind("call");
  };
  // A model or an optimizer carried through an archive of its own: one
  // fabric.save/fabric.load of the same file.
  // Not where only some ranks run it (one rank's, or under a per-rank
  // condition: a collective there would wait for the others), and not in a
  // template's instantiations (each may spell the object differently).
  auto archive_trip = [](bool archiveIsArgument, std::string member) {
    auto perRankBranch = hasAncestor(ifStmt(hasCondition(expr(isPerRankValue()))));
    return makeRule(
        cxxMemberCallExpr(endsArchiveTrip(archiveIsArgument), inFabricScope(), unless(onOneRankOnly()),
                          unless(perRankBranch), unless(isInTemplateInstantiation()))
            .bind("call"),
        flatten(edits::removeStatement("archiveDeclaration"), edits::removeStatement("firstOfTrip"),
                changeTo(node("call"), cat(edits::fabricMember(member + "("), node("path"), ", ",
                                           ifBound("dereference", cat("*"), cat("")), node("value"), ")"))),
        cat(archiveIsArgument ? "the archive only carried this file into the model or optimizer: fabric.load(path, "
                                "value) reads it on every rank and overwrites the set-up parameters in place (a "
                                "sharded strategy keeps each rank's shard of the optimizer's state), where "
                                "Module::load/Optimizer::load would replace them behind the strategy's back"
                              : "the archive only carried the model or optimizer into this file: fabric.save(path, "
                                "value) writes the same file on rank 0, atomically (a sharded strategy gathers the "
                                "optimizer's state first); every rank calls"));
  };
  return {
      "fabric-checkpoint", "+",
      "torch::save(value, path) becomes fabric.save(path, value) (rank 0 writes, atomically), "
      "torch::load(value, path) becomes fabric.load(path, value), an archive that only "
      "carries a model or an optimizer to or from a file becomes fabric.save/fabric.load of that "
      "object, and any other archive's save_to(path) becomes fabric.save(path, archive).",
      RuleKind::Rewrite,
      applyFirst<std::string>({
          // Already on one rank (`if (fabric.is_global_zero())`): the
          // collective fabric.save there would wait for the others.
          makeRule(callExpr(call("::torch::save"), onOneRankOnly()), noEdits(), cat("written on one rank")),
          makeRule(cxxMemberCallExpr(archive_save_to(expr()), onOneRankOnly()), noEdits(), cat("written on one rank")),
          archive_trip(false, "save"),
          archive_trip(true, "load"),
          makeRule(callExpr(call("::torch::save"), perRankBranch, isWholeStatement()), rankZeroAlone, perRankSave),
          // The same for an archive written under such a condition.
          makeRule(cxxMemberCallExpr(archive_save_to(expr()), perRankBranch, isWholeStatement()), rankZeroAlone,
                   perRankSave),
          makeRule(callExpr(call("::torch::save"), hasArgument(0, isTrainingState())), changeTo(node("call"), save),
                   cat("rank 0 writes the checkpoint, atomically; every rank calls. It holds what the "
                       "original saved; for a resume that continues exactly (the loader's place, every "
                       "rank's random generators, the schedulers, the step counters) save a fabric::State "
                       "instead: docs/runtime.md, \"Exact resume\"")),
          // Data (a tensor cache every rank reads back): written once, by
          // rank 0, before any rank reads it; where the function gets no
          // Fabric, every rank writing the same bytes is left as it is.
          makeRule(call("::torch::save"), edits::optionalEdit(changeTo(node("call"), save)),
                   cat("rank 0 writes the file, atomically, before any rank reads it; every rank calls")),
          // Loading a model or an optimizer; a tensor read from a file is
          // data every rank reads itself.
          makeRule(callExpr(call("::torch::load"), hasArgument(0, isTrainingState())),
                   changeTo(node("call"), cat(edits::fabricMember("load("), node("path"), ", ", node("value"), ")")),
                   cat("every rank loads the checkpoint onto its own device")),
          // `archive.save_to(path)`, or through a raw or smart pointer `archive->save_to(path)`.
          makeRule(archive_save_to(anyOf(
                       cxxOperatorCallExpr(hasOverloadedOperatorName("->"), hasArgument(0, expr().bind("archive")))
                           .bind("pointer"),
                       expr(expr(hasType(pointerType())).bind("archive")).bind("pointer"), expr().bind("archive"))),
                   changeTo(node("call"), cat(edits::fabricMember("save("), node("path"), ", ",
                                              ifBound("pointer", cat("*"), cat("")), node("archive"), ")")),
                   cat("rank 0 writes the archive, atomically; every rank calls")),
      })};
}

}  // namespace fabricize
