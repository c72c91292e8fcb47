// The vocabulary the rules are written in: LibTorch and Fabric types, device
// arguments, loader batches, the scope where a Fabric is available. Each
// matcher is a small value so that rules read like the sentence in their doc.
#pragma once

#include "rule-helpers/Types.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/ASTMatchers/ASTMatchers.h"

#include <functional>

namespace fabricize::match {

using namespace clang::ast_matchers;
using clang::ast_matchers::internal::Matcher;

inline Matcher<clang::QualType> recordTypeOf(DeclarationMatcher record) {
  return qualType(hasUnqualifiedDesugaredType(recordType(hasDeclaration(record))));
}
inline Matcher<clang::QualType> recordNamed(llvm::StringRef qualifiedName) {
  return recordTypeOf(cxxRecordDecl(hasName(qualifiedName)));
}
inline Matcher<clang::QualType> valueOrReference(Matcher<clang::QualType> type) {
  return anyOf(type, references(type));
}

// --- LibTorch and Fabric classes -------------------------------------------
inline DeclarationMatcher tensorClass() { return cxxRecordDecl(hasAnyName("::at::Tensor", "::at::TensorBase")); }
inline DeclarationMatcher moduleClass() { return cxxRecordDecl(isSameOrDerivedFrom("::torch::nn::Module")); }
inline Matcher<clang::QualType> optimizerType() {
  return recordTypeOf(cxxRecordDecl(isSameOrDerivedFrom("::torch::optim::Optimizer")));
}
inline DeclarationMatcher fabricClass() { return cxxRecordDecl(hasName("::fabric::Fabric")); }
inline Matcher<clang::QualType> fabricType() { return recordTypeOf(fabricClass()); }

// c10::Device or a bare c10::DeviceType such as torch::kCUDA.
inline Matcher<clang::QualType> deviceLikeType() {
  return qualType(anyOf(recordNamed("::c10::Device"),
                        hasUnqualifiedDesugaredType(enumType(hasDeclaration(enumDecl(hasName("::c10::DeviceType")))))));
}
inline Matcher<clang::QualType> scalarTypeEnum() {
  return qualType(hasUnqualifiedDesugaredType(enumType(hasDeclaration(enumDecl(hasName("::c10::ScalarType"))))));
}

// "cuda:<index>" as a string literal, for an index other than 0. "cuda:0"
// is what single-device programs write for "the GPU": it becomes the rank's
// device like plain "cuda".
AST_MATCHER(clang::StringLiteral, isIndexedCudaDevice) {
  if (!Node.isOrdinary()) return false;
  llvm::StringRef text = Node.getString();
  if (!text.consume_front("cuda:") || text.empty() || text.find_first_not_of("0123456789") != llvm::StringRef::npos)
    return false;
  return text.find_first_not_of('0') != llvm::StringRef::npos;
}
// "cpu" as a string literal.
AST_MATCHER(clang::StringLiteral, matchesCpuString) { return Node.isOrdinary() && Node.getString() == "cpu"; }
// "cuda" or "cuda:<n>" as a string literal.
AST_MATCHER(clang::StringLiteral, isCudaDeviceString) {
  return Node.isOrdinary() && Node.getString().starts_with("cuda");
}
// A device with a fixed index other than 0: `Device("cuda:1")`,
// `Device(kCUDA, 1)`.
inline StatementMatcher indexedDevice() {
  return cxxConstructExpr(hasType(recordNamed("::c10::Device")),
                          anyOf(hasArgument(0, ignoringImplicit(stringLiteral(isIndexedCudaDevice()))),
                                hasArgument(0, hasDescendant(stringLiteral(isIndexedCudaDevice()))),
                                allOf(argumentCountIs(2), hasArgument(1, unless(cxxDefaultArgExpr())),
                                      unless(hasArgument(1, ignoringImplicit(integerLiteral(equals(0))))))));
}

// `fabric.device()`: what migrated code passes; never a device to migrate.
inline StatementMatcher fabricDeviceCall() {
  return cxxMemberCallExpr(callee(cxxMethodDecl(hasName("device"), ofClass(fabricClass()))));
}

// An expression as the user spelled it, seen through the implicit
// conversions LibTorch's overloads add (DeviceType -> Device -> TensorOptions).
inline Matcher<clang::Expr> spelledAs(Matcher<clang::Expr> inner) {
  auto converted = [](Matcher<clang::Expr> m) {
    return ignoringImplicit(anyOf(m, cxxConstructExpr(hasArgument(0, ignoringImplicit(m))),
                                  cxxFunctionalCastExpr(hasSourceExpression(ignoringImplicit(m)))));
  };
  return converted(converted(inner));
}

// A device argument, bound to `id`: `device`, `torch::kCUDA`, `x.device()`,
// `cuda ? torch::kCUDA : torch::kCPU`.
inline Matcher<clang::Expr> deviceArgument(std::string id) {
  return spelledAs(expr(hasType(deviceLikeType()), unless(ignoringImplicit(fabricDeviceCall()))).bind(id));
}

// main in a file that constructs no Fabric yet: where fabric-insert puts one
// (and fabric-launch its launch). A Fabric constructed elsewhere in the file
// means the user already decided where it lives.
// The engine matches only the source's own declarations (ASTContext's
// traversal scope), not the whole TU: this looks through those.
AST_MATCHER(clang::FunctionDecl, mainFileDeclaresNoFabric) {
  clang::ASTContext& context = Finder->getASTContext();
  auto localFabric = varDecl(hasType(fabricType()), unless(parmVarDecl()));
  auto declaresFabric = decl(anyOf(localFabric, hasDescendant(localFabric)));
  const clang::SourceManager& sm = context.getSourceManager();
  for (clang::Decl* top : context.getTraversalScope()) {
    if (llvm::isa<clang::TranslationUnitDecl>(top)) {
      for (clang::Decl* d : llvm::cast<clang::TranslationUnitDecl>(top)->decls())
        if (sm.isInMainFile(sm.getExpansionLoc(d->getLocation())) &&
            !clang::ast_matchers::match(declaresFabric, *d, context).empty())
          return false;
    } else if (sm.isInMainFile(sm.getExpansionLoc(top->getLocation())) &&
               !clang::ast_matchers::match(declaresFabric, *top, context).empty()) {
      return false;
    }
  }
  return true;
}

// Declared in torch::, at:: or c10:: by LibTorch. (Through the declaration
// contexts: the parent map covers only the source's own declarations.) A
// project's own code in such a namespace (a `torch::Trainer<Task>` of its
// own) is not LibTorch's: LibTorch's headers lie in a system folder or under
// folders named torch/, ATen/ or c10/ (its include layout).
bool isInLibTorchHeader(const clang::Decl& decl, const clang::SourceManager& sm);
AST_MATCHER(clang::Decl, isLibTorchDeclaration) {
  const clang::NamespaceDecl* outermost = nullptr;
  for (const clang::DeclContext* c = Node.getDeclContext(); c; c = c->getParent())
    if (const auto* ns = llvm::dyn_cast<clang::NamespaceDecl>(c)) outermost = ns;
  if (!outermost) return false;
  llvm::StringRef name = outermost->getName();
  if (name != "torch" && name != "at" && name != "c10") return false;
  return isInLibTorchHeader(Node, Finder->getASTContext().getSourceManager());
}
// An expression or declaration that names something of LibTorch.
inline StatementMatcher libTorchUse() {
  auto torchDecl = decl(isLibTorchDeclaration());
  auto torchType = qualType(hasUnqualifiedDesugaredType(recordType(hasDeclaration(torchDecl))));
  return stmt(anyOf(declRefExpr(to(torchDecl)), memberExpr(member(torchDecl)),
                    cxxConstructExpr(hasDeclaration(torchDecl)), expr(hasType(torchType)),
                    declStmt(has(varDecl(hasType(torchType))))));
}

// main of a training program: it uses LibTorch (a second executable of the
// project, a data converter say, gets no Fabric).
inline DeclarationMatcher mainNeedingFabric() {
  return functionDecl(isMain(), isDefinition(), hasBody(compoundStmt(has(stmt()))),
                      hasBody(hasDescendant(libTorchUse())), mainFileDeclaresNoFabric());
}

// main of a program whose training code lives elsewhere (`return
// run(argc, argv);`): it uses no LibTorch itself, and gets a Fabric only if
// a function it calls needs one (Threading.h). Bound to "main", its body to
// "body".
inline DeclarationMatcher delegatingMain() {
  return functionDecl(isMain(), isDefinition(), hasBody(compoundStmt(has(stmt())).bind("body")),
                      unless(hasBody(hasDescendant(libTorchUse()))), mainFileDeclaresNoFabric())
      .bind("main");
}

// An optimizer, or what a program holds one by: a reference, a raw pointer,
// a std::unique_ptr or std::shared_ptr (to the optimizer's own class or to
// the base torch::optim::Optimizer).
inline Matcher<clang::QualType> optimizerHandleType() {
  auto optimizer = optimizerType();
  auto smart = recordTypeOf(classTemplateSpecializationDecl(hasAnyName("::std::unique_ptr", "::std::shared_ptr"),
                                                            hasTemplateArgument(0, refersToType(optimizer))));
  return anyOf(optimizer, references(optimizer), pointsTo(optimizer), smart, references(smart));
}
// The function (not a lambda inside it) whose body holds `node`.
const clang::FunctionDecl* enclosingFunction(const clang::DynTypedNode& node, clang::ASTContext& context);

// The same test on a type, outside a matcher: isOptimizerHandle (Types.h).
// The class keeps the Fabric, or will (fabric-thread-fabric: it holds an optimizer).
bool holdsFabricOrOptimizer(const clang::CXXRecordDecl& record);

// The class whose Fabric member `record`'s code uses: `record` itself when
// it holds the Fabric or an optimizer (fabric-thread-fabric gives it the
// member), else the nearest base that does (a BaseTrainer whose overrides
// train), reached through public or protected inheritance, whose member
// a derived class can name (the Fabric member goes above its first data
// member, which is not private). Null when there is none.
const clang::CXXRecordDecl* fabricHolderOf(const clang::CXXRecordDecl& record);
// A class that holds neither the Fabric nor an optimizer but derives from
// one that will get the Fabric (through any inheritance but virtual; no
// Fabric member yet): its constructors take the Fabric and hand it to
// their base, whose constructor will require it.
bool derivesFromClassGettingFabric(const clang::CXXRecordDecl& record);
AST_MATCHER(clang::CXXRecordDecl, inheritsFabricToCome) { return derivesFromClassGettingFabric(Node); }

// A class that trains (it holds an optimizer, by value, reference or
// pointer) but has no Fabric yet: the Fabric is threaded into it
// (fabric-thread-fabric) as a reference member.
// LibTorch's and the standard library's classes are ruled out first: their
// members are never edited, and looking through them (at::Tensor's
// thousand methods, read out of the PCH at every construction the user's
// code makes) was most of an analysis's matching time.
inline DeclarationMatcher classNeedingFabric() {
  return cxxRecordDecl(unless(isExpansionInSystemHeader()), unless(isLibTorchDeclaration()), isDefinition(),
                       unless(isImplicit()), has(fieldDecl(hasType(optimizerHandleType()))),
                       unless(has(fieldDecl(hasType(valueOrReference(fabricType()))))));
}

// A class of the project's own that inheritsFabricToCome.
inline DeclarationMatcher classInheritingFabric() {
  return cxxRecordDecl(unless(isExpansionInSystemHeader()), unless(isLibTorchDeclaration()), isDefinition(),
                       unless(isImplicit()), inheritsFabricToCome());
}

// Whether `range` begins or ends inside a macro expansion, where no edit may
// go. The first `>` of a `>>` that closes two template argument lists
// (`std::unique_ptr<Loader<Set, Sampler>>`) has a location of the same kind
// (the parser splits the token), but it is the file's own text.
inline bool inMacroExpansion(clang::SourceRange range, const clang::SourceManager& sm) {
  auto macro = [&](clang::SourceLocation at) {
    if (!at.isMacroID()) return false;
    const clang::SrcMgr::ExpansionInfo& expansion = sm.getSLocEntry(sm.getFileID(at)).getExpansion();
    bool splitToken = !expansion.isExpansionTokenRange() && !expansion.isMacroArgExpansion() &&
                      expansion.getExpansionLocStart().isFileID();
    return !splitToken;
  };
  return macro(range.getBegin()) || macro(range.getEnd());
}

// --- Where rules apply -------------------------------------------------------
// Inside any function. Whether that function has a Fabric, or can be given
// one, is decided once the whole project has been matched (Threading.h): an
// edit that uses the Fabric records that its function needs one, and is
// applied only if the function gets it.
inline auto inFabricScope() { return hasAncestor(functionDecl()); }

// Training code: a function that uses LibTorch (a usage() that prints help
// is not). Its console and file output goes through rank zero.
inline DeclarationMatcher trainingFunction() { return functionDecl(hasBody(hasDescendant(libTorchUse()))); }

// A function that gets its Fabric as a `fabric::Fabric&` parameter when an
// edit in it needs one (fabric-thread-fabric): not main, not a method of a
// class that holds the Fabric (or is about to), and not one that declares a
// Fabric itself. Constructors, destructors, operators and virtual methods
// cannot take it (threading::blockedReason says why).
bool isThreadableFunction(const clang::FunctionDecl& function, clang::ASTContext& context);
AST_MATCHER(clang::FunctionDecl, threadableFunction) { return isThreadableFunction(Node, Finder->getASTContext()); }

// Output on an error path stays on every rank (the rank that fails is the
// one whose reason must show): in a block that goes on to fail (a non-zero
// integer return, exit/abort/terminate, or a throw among the statements
// after it), or in a catch handler that fails or whose message shows the
// exception (`e.what()`).
bool isOnErrorPath(const clang::Stmt& node, clang::ASTContext& context);
AST_MATCHER(clang::Stmt, onErrorPath) { return isOnErrorPath(Node, Finder->getASTContext()); }

// Code the user already runs on one rank: inside `if (fabric.is_global_zero())`
// or `if (fabric.global_rank() == 0)` (or the local rank's).
inline auto onOneRankOnly() {
  auto rankQuery = cxxMemberCallExpr(callee(
      cxxMethodDecl(hasAnyName("is_global_zero", "global_rank", "local_rank", "node_rank"), ofClass(fabricClass()))));
  return hasAncestor(ifStmt(hasCondition(expr(anyOf(ignoringParenImpCasts(rankQuery), hasDescendant(rankQuery))))));
}

// --- Modules and optimizers -------------------------------------------------
// `model` in `model->...` (ModuleHolder or shared_ptr) or a plain reference;
// binds the declaration to `id` and the spelled reference to `id + "Ref"`.
inline Matcher<clang::Expr> moduleReference(const std::string& id) {
  auto ref =
      expr(anyOf(declRefExpr(to(valueDecl().bind(id))), memberExpr(member(valueDecl().bind(id))))).bind(id + "Ref");
  return ignoringParenImpCasts(
      anyOf(cxxOperatorCallExpr(hasOverloadedOperatorName("->"), hasArgument(0, ignoringParenImpCasts(ref))), ref));
}
inline Matcher<clang::Expr> moduleNamed(Matcher<clang::ValueDecl> decl) {
  auto ref = expr(anyOf(declRefExpr(to(valueDecl(decl))), memberExpr(member(decl))));
  return ignoringParenImpCasts(
      anyOf(cxxOperatorCallExpr(hasAnyOverloadedOperatorName("->", "*"), hasArgument(0, ignoringParenImpCasts(ref))),
            unaryOperator(hasOperatorName("*"), hasUnaryOperand(ignoringParenImpCasts(ref))), ref));
}
// `model->parameters()` for the module declared by `decl`.
inline StatementMatcher parametersOf(Matcher<clang::ValueDecl> decl) {
  return cxxMemberCallExpr(callee(cxxMethodDecl(hasAnyName("parameters", "named_parameters"), ofClass(moduleClass()))),
                           on(moduleNamed(decl)));
}
// `fabric.setup(model, ...)` for `decl`.
inline StatementMatcher fabricSetupOf(Matcher<clang::ValueDecl> decl) {
  return cxxMemberCallExpr(callee(cxxMethodDecl(hasName("setup"), ofClass(fabricClass()))),
                           hasArgument(0, moduleNamed(decl)));
}
// The one module member of a class that holds an optimizer (a Trainer): the
// model it trains, which the Fabric sets up where the class is constructed.
// With several module members (a frozen teacher, say) none is assumed.
AST_MATCHER(clang::FieldDecl, isSoleModuleOfTrainingClass) {
  if (!isModuleType(Node.getType())) return false;
  int modules = 0;
  bool holdsOptimizer = false;
  for (const clang::FieldDecl* field : Node.getParent()->fields()) {
    modules += isModuleType(field->getType());
    holdsOptimizer = holdsOptimizer || isOptimizerHandle(field->getType());
  }
  return holdsOptimizer && modules == 1;
}

// The module bound to `id` is trained in this function (an optimizer holds
// its parameters), already set up, or the model a training class holds:
// Fabric's setup owns its device.
// Whether an optimizer in the function around `statement` trains `model`
// (Optimizers.h: by value, by pointer, over parameter groups...).
bool isTrainedAround(const clang::Stmt& statement, const clang::ValueDecl& model, clang::ASTContext& context);
AST_MATCHER_P(clang::Stmt, trainsBoundModule, std::string, id) {
  return Builder->removeBindings([&](const clang::ast_matchers::internal::BoundNodesMap& nodes) {
    const auto* model = nodes.getNodeAs<clang::ValueDecl>(id);
    return !model || !isTrainedAround(Node, *model, Finder->getASTContext());
  });
}
inline auto isSetUpModule(const std::string& id) {
  return anyOf(trainsBoundModule(id), hasAncestor(functionDecl(hasDescendant(fabricSetupOf(equalsBoundNode(id))))),
               on(moduleNamed(fieldDecl(isSoleModuleOfTrainingClass()))));
}

// --- Data loaders and their batches -----------------------------------------
inline Matcher<clang::QualType> loaderType() {
  return recordTypeOf(cxxRecordDecl(
      anyOf(isSameOrDerivedFrom("::torch::data::DataLoaderBase"), isSameOrDerivedFrom("::fabric::DataLoader"))));
}
// The variable of `for (auto& batch : *loader)`.
inline DeclarationMatcher loaderLoopVariable() {
  return varDecl(hasParent(
      declStmt(hasParent(cxxForRangeStmt(hasRangeInit(ignoringParenImpCasts(expr(hasType(loaderType())))))))));
}
// A tensor method that moves to a device: `.to(<device>...)` or `.cuda()`.
inline StatementMatcher tensorDeviceMove(Matcher<clang::Expr> object, const std::string& deviceId = "device") {
  return cxxMemberCallExpr(on(object), anyOf(allOf(callee(cxxMethodDecl(hasName("to"), ofClass(tensorClass()))),
                                                   hasArgument(0, deviceArgument(deviceId))),
                                             callee(cxxMethodDecl(hasName("cuda"), ofClass(tensorClass())))));
}
// What a loader yields: the loop variable, a member of it (`batch.data`),
// or a local initialised from one (`auto data = batch.data;`, possibly
// through a device move). Fabric's loader already put these on the device.
inline Matcher<clang::Expr> loaderBatch() {
  auto direct = expr(ignoringParenImpCasts(
      anyOf(declRefExpr(to(loaderLoopVariable())),
            memberExpr(hasObjectExpression(ignoringParenImpCasts(declRefExpr(to(loaderLoopVariable()))))))));
  auto copied = varDecl(hasInitializer(spelledAs(anyOf(direct, tensorDeviceMove(direct, "batchDevice")))));
  return expr(ignoringParenImpCasts(anyOf(direct, declRefExpr(to(copied)))));
}

// An iterator of a data loader (`auto it = loader->begin();`), and reading
// a batch through one (`*it`, `it->data`): the shape of max_steps trainers,
// which restart the iterator at the end of an epoch.
inline Matcher<clang::QualType> loaderIteratorType() {
  return recordTypeOf(cxxRecordDecl(hasAnyName("::torch::data::Iterator", "::fabric::DataLoader::Iterator")));
}
inline StatementMatcher loaderIteratorRead() {
  return cxxOperatorCallExpr(hasAnyOverloadedOperatorName("*", "->"),
                             hasArgument(0, ignoringParenImpCasts(expr(hasType(loaderIteratorType())))));
}

// --- Training loops ------------------------------------------------------------
// A backward pass: `loss.backward()`, `torch::autograd::backward(...)`, or
// `fabric.backward(loss)` in migrated code.
inline StatementMatcher backwardCall() {
  return callExpr(anyOf(cxxMemberCallExpr(callee(cxxMethodDecl(hasName("backward"), ofClass(tensorClass())))),
                        cxxMemberCallExpr(callee(cxxMethodDecl(hasName("backward"), ofClass(fabricClass())))),
                        callExpr(callee(functionDecl(hasName("::torch::autograd::backward"))))));
}
inline StatementMatcher anyLoop() { return stmt(anyOf(forStmt(), whileStmt(), doStmt(), cxxForRangeStmt())); }
// A loop whose body runs a backward pass (directly: what a called function
// does is not seen).
inline StatementMatcher trainingLoop() { return stmt(anyLoop(), hasDescendant(backwardCall())); }
// A range-for over a data loader (torch's or the Fabric's).
inline StatementMatcher loaderLoop() {
  return cxxForRangeStmt(hasRangeInit(ignoringParenImpCasts(expr(hasType(loaderType())))));
}

// Statements as they sit in a block: a full-expression that creates
// temporaries (most LibTorch calls) is wrapped in ExprWithCleanups.
inline StatementMatcher asStatement(StatementMatcher m) { return stmt(anyOf(m, exprWithCleanups(has(m)))); }
inline auto isWholeStatement() {
  return anyOf(hasParent(compoundStmt()), hasParent(exprWithCleanups(hasParent(compoundStmt()))));
}

// `torch::cuda::is_available()` anywhere in a condition.
inline Matcher<clang::Expr> mentionsCudaAvailable() {
  auto call = callExpr(callee(functionDecl(hasName("::torch::cuda::is_available"))));
  return expr(anyOf(ignoringParenImpCasts(call), hasDescendant(call)));
}

}  // namespace fabricize::match
