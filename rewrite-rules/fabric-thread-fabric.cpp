// When training happens outside main, the Fabric is passed in.
//  - A class that holds the optimizer (a Trainer declared in its own header)
//    gets a `fabric::Fabric&` member, a constructor parameter in the
//    declaration and the definition, the member initialised from it, and
//    the Fabric passed where it is constructed (also through
//    std::make_unique/make_shared). The other rules then use the member.
//  - A class derived from one (a ClassificationTrainer over a BaseTrainer
//    that holds the optimizer) uses the base's member, virtual overrides
//    included; its constructors take the Fabric and hand it to the base.
//  - Any other function whose code needs the Fabric (a train() that calls
//    backward, a test() that prints) gets a `fabric::Fabric& fabric`
//    parameter at every declaration, and every call passes it. Whether it
//    does is decided for the whole project (Threading.h): these edits carry
//    a threading::Fact and are applied only when the function gets the Fabric.
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "rule-helpers/Optimizers.h"
#include "RuleFactories.h"
#include "rule-helpers/Threading.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/DeclCXX.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/TypeLoc.h"
#include "clang/Lex/Lexer.h"
#include "llvm/Support/Path.h"

namespace fabricize {

using namespace clang;
using namespace clang::transformer;
using namespace match;

namespace {

using MatchResult = ast_matchers::MatchFinder::MatchResult;

llvm::SmallVector<Edit, 1> insertion(SourceLocation at, std::string text) {
  Edit edit;
  edit.Range = CharSourceRange::getCharRange(at, at);
  edit.Replacement = std::move(text);
  return {edit};
}

// The start of `loc`'s line and the whitespace that indents it.
std::pair<SourceLocation, std::string> lineOf(SourceLocation loc, const SourceManager& sm) {
  loc = sm.getExpansionLoc(loc);
  auto [file, offset] = sm.getDecomposedLoc(loc);
  llvm::StringRef text = sm.getBufferData(file);
  size_t start = text.rfind('\n', offset);  // the last newline before `loc`
  start = start == llvm::StringRef::npos ? 0 : start + 1;
  llvm::StringRef indent = text.slice(start, offset);
  indent = indent.take_while([](char c) { return c == ' ' || c == '\t'; });
  return {loc.getLocWithOffset(static_cast<int>(start) - static_cast<int>(offset)), indent.str()};
}

// `fabric::Fabric& fabric_;` above the class's first data member.
EditGenerator addMember() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* record = result.Nodes.getNodeAs<CXXRecordDecl>("class");
    auto field = record->field_begin();
    if (field == record->field_end()) return llvm::SmallVector<Edit, 1>();
    auto [lineStart, indent] = lineOf(field->getBeginLoc(), *result.SourceManager);
    return insertion(lineStart, indent + "fabric::Fabric& " + edits::threadedMemberName(*record) + ";\n");
  };
}

AST_MATCHER(CXXRecordDecl, isAggregateClass) { return Node.hasDefinition() && Node.isAggregate(); }

// `Trainer() = default;`: the class's default constructor, declared but
// made by the compiler; null when it has none.
const CXXConstructorDecl* defaultedDefaultConstructor(const CXXRecordDecl& record) {
  for (const CXXConstructorDecl* ctor : record.ctors())
    if (!ctor->isImplicit() && ctor->isDefaultConstructor() && ctor->isExplicitlyDefaulted()) return ctor;
  return nullptr;
}

// Whether the class has a constructor of its own to take the Fabric: one
// written with a body (`= default` and `= delete` ones make nothing).
bool declaresConstructor(const CXXRecordDecl& record) {
  for (const CXXConstructorDecl* ctor : record.ctors())
    if (!ctor->isImplicit() && !ctor->isExplicitlyDefaulted() && !ctor->isDeleted()) return true;
  return false;
}

// A class with no constructor of its own (its default member initialisers
// make the model and the optimizer) gets one that takes the Fabric and sets
// up what those initialisers made: first in its public section (at the top
// of a struct's body; a `public:` of its own at the end of a class that has
// none).
EditGenerator addConstructor() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* record = result.Nodes.getNodeAs<CXXRecordDecl>("class");
    const SourceManager& sm = *result.SourceManager;
    auto field = record->field_begin();
    if (field == record->field_end()) return llvm::SmallVector<Edit, 1>();
    const std::string indent = lineOf(field->getBeginLoc(), sm).second;
    const std::string member = edits::threadedMemberName(*record);
    std::string setups;
    std::vector<optimizers::Creation> creations = optimizers::memberInitializerCreations(*record, *result.Context);
    for (const optimizers::SetupGroup& group : optimizers::setupGroups(creations))
      setups += indent + "  " +
                optimizers::setupCalls(group, group.creations.size(), member, indent + "  ", *result.Context) + "\n";
    std::string ctor = indent + "explicit " + record->getNameAsString() + "(fabric::Fabric& fabric) : " + member +
                       "(fabric) {" + (setups.empty() ? "}\n" : "\n" + setups + indent + "}\n");
    if (const CXXConstructorDecl* defaulted = defaultedDefaultConstructor(*record)) {
      // `Trainer() = default;` becomes the constructor that takes the Fabric.
      SourceLocation end = Lexer::findLocationAfterToken(sm.getExpansionLoc(defaulted->getEndLoc()), tok::semi, sm,
                                                         result.Context->getLangOpts(), false);
      if (end.isInvalid()) return llvm::SmallVector<Edit, 1>();
      Edit edit;
      edit.Range = CharSourceRange::getCharRange(sm.getExpansionLoc(defaulted->getBeginLoc()), end);
      std::string text = ctor.substr(indent.size());
      edit.Replacement = text.substr(0, text.size() - 1);  // the line's own end stays
      return llvm::SmallVector<Edit, 1>{edit};
    }
    const AccessSpecDecl* publicSection = nullptr;
    for (const Decl* decl : record->decls())
      if (const auto* access = dyn_cast<AccessSpecDecl>(decl); access && access->getAccess() == AS_public) {
        publicSection = access;
        break;
      }
    if (publicSection) {  // the line after `public:`
      SourceLocation colon = sm.getExpansionLoc(publicSection->getColonLoc());
      auto [file, offset] = sm.getDecomposedLoc(colon);
      llvm::StringRef text = sm.getBufferData(file);
      size_t next = text.find('\n', offset);
      if (next == llvm::StringRef::npos) return llvm::SmallVector<Edit, 1>();
      return insertion(colon.getLocWithOffset(static_cast<int>(next + 1 - offset)), ctor);
    }
    if (!record->isClass()) {  // a struct's members are public from the top
      const Decl* first =
          *std::find_if(record->decls_begin(), record->decls_end(), [](const Decl* d) { return !d->isImplicit(); });
      return insertion(lineOf(first->getBeginLoc(), sm).first, ctor);
    }
    auto [closeLine, closeIndent] = lineOf(record->getBraceRange().getEnd(), sm);
    const std::string access = indent.size() > closeIndent.size() + 1 ? indent.substr(1) : closeIndent;
    return insertion(closeLine, access + "public:\n" + ctor);
  };
}

AST_MATCHER(CXXRecordDecl, declaresNoConstructor) { return !declaresConstructor(Node); }

// `fabric::Fabric& fabric` first in the constructor's parameter list.
EditGenerator addParameter() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* ctor = result.Nodes.getNodeAs<CXXConstructorDecl>("ctor");
    if (ctor->getNumParams() > 0)
      return insertion(edits::beforeLeadingComments(ctor->getParamDecl(0)->getBeginLoc(), *result.SourceManager),
                       "fabric::Fabric& fabric, ");
    FunctionTypeLoc type = ctor->getFunctionTypeLoc();
    if (!type) return llvm::SmallVector<Edit, 1>();
    return insertion(type.getLParenLoc().getLocWithOffset(1), "fabric::Fabric& fabric");
  };
}

// `fabric_(fabric)` first among the member initialisers: the member is
// declared first, and initialisers run in declaration order.
EditGenerator initialiseMember() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* ctor = result.Nodes.getNodeAs<CXXConstructorDecl>("ctor");
    std::string init = edits::threadedMemberName(*ctor->getParent()) + "(fabric)";
    for (const CXXCtorInitializer* each : ctor->inits())
      if (each->isWritten()) return insertion(each->getSourceLocation(), init + ", ");
    FunctionTypeLoc type = ctor->getFunctionTypeLoc();
    if (!type) return llvm::SmallVector<Edit, 1>();
    return insertion(type.getRParenLoc().getLocWithOffset(1), " : " + init);
  };
}

// A derived trainer's constructor hands the Fabric it now takes to the base
// that keeps it: `: BaseTrainer(fabric, model, lr)` (the Fabric first in the
// written base or delegating initialiser, or a base initialiser of its own
// when the base was default-constructed).
EditGenerator passFabricToBase() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* ctor = result.Nodes.getNodeAs<CXXConstructorDecl>("ctor");
    const SourceManager& sm = *result.SourceManager;
    for (const CXXCtorInitializer* init : ctor->inits()) {
      if (!init->isWritten() || !(init->isBaseInitializer() || init->isDelegatingInitializer())) continue;
      const CXXRecordDecl* base = init->isBaseInitializer() ? init->getBaseClass()->getAsCXXRecordDecl() : nullptr;
      if (base && !derivesFromClassGettingFabric(*base) && !holdsFabricOrOptimizer(*base))
        continue;  // another base (a mixin) keeps no Fabric
      // The first argument as written: a constructor call, or in a template
      // a parenthesised list the base's constructor is not chosen for yet.
      const Expr* first = nullptr;
      if (const auto* construct = dyn_cast_or_null<CXXConstructExpr>(init->getInit()->IgnoreImplicit());
          construct && construct->getNumArgs() > 0 && !isa<CXXDefaultArgExpr>(construct->getArg(0)))
        first = construct->getArg(0);
      else if (const auto* list = dyn_cast_or_null<ParenListExpr>(init->getInit()); list && list->getNumExprs() > 0)
        first = list->getExpr(0);
      if (first) return insertion(edits::beforeLeadingComments(first->getBeginLoc(), sm), "fabric, ");
      if (init->getLParenLoc().isValid()) return insertion(init->getLParenLoc().getLocWithOffset(1), "fabric");
      return llvm::SmallVector<Edit, 1>();
    }
    // The base is default-constructed: it gets an initialiser, first.
    for (const CXXBaseSpecifier& base : ctor->getParent()->bases()) {
      const CXXRecordDecl* record = base.getType()->getAsCXXRecordDecl();
      if (!record || (!derivesFromClassGettingFabric(*record) && !holdsFabricOrOptimizer(*record))) continue;
      std::string init = record->getNameAsString() + "(fabric)";
      for (const CXXCtorInitializer* each : ctor->inits())
        if (each->isWritten()) return insertion(each->getSourceLocation(), init + ", ");
      FunctionTypeLoc type = ctor->getFunctionTypeLoc();
      if (!type) return llvm::SmallVector<Edit, 1>();
      return insertion(type.getRParenLoc().getLocWithOffset(1), " : " + init);
    }
    return llvm::SmallVector<Edit, 1>();
  };
}

// `Trainer trainer(fabric, model, ...)` where the class is constructed.
EditGenerator passFabric() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* construct = result.Nodes.getNodeAs<CXXConstructExpr>("construct");
    // A derived trainer's base initialiser gets the Fabric from the
    // derived constructor's new parameter (passFabricToBase), not from the
    // member the base is about to initialise.
    // (The parent map names the constructor, not the initialiser.)
    for (DynTypedNode node = DynTypedNode::create(*construct);;) {
      DynTypedNodeList parents = result.Context->getParents(node);
      if (parents.empty()) break;
      if (const auto* ctor = parents[0].get<CXXConstructorDecl>()) {
        for (const CXXCtorInitializer* init : ctor->inits())
          if (init->getInit() == node.get<Expr>() && (init->isBaseInitializer() || init->isDelegatingInitializer()))
            return llvm::SmallVector<Edit, 1>();
        break;
      }
      if (!parents[0].get<ExprWithCleanups>() && !parents[0].get<MaterializeTemporaryExpr>() &&
          !parents[0].get<CXXBindTemporaryExpr>())
        break;
      node = parents[0];
    }
    std::string name = edits::fabricNameAt(result);
    if (construct->getNumArgs() > 0 && !isa<CXXDefaultArgExpr>(construct->getArg(0)))
      return insertion(edits::beforeLeadingComments(construct->getArg(0)->getBeginLoc(), *result.SourceManager),
                       name + ", ");
    SourceRange parens = construct->getParenOrBraceRange();
    if (parens.isValid()) return insertion(parens.getBegin().getLocWithOffset(1), name);
    // Constructed with no parentheses: `Classifier clf;`, `new Classifier;`
    // (a constructor of the class's own, which gets the parameter), or an
    // aggregate default-initialised (`Trainer trainer;`), whose Fabric
    // member comes first: `Trainer trainer{fabric};`.
    const CXXRecordDecl& constructed = *construct->getConstructor()->getParent();
    const bool aggregate = constructed.isAggregate();
    // An implicit default constructor is replaced by one that takes the
    // Fabric (addConstructor) when the class declares none.
    if (construct->getConstructor()->isImplicit() && !aggregate && declaresConstructor(constructed))
      return llvm::SmallVector<Edit, 1>();
    const std::string given = aggregate ? "{" + name + "}" : "(" + name + ")";
    const SourceManager& sm = *result.SourceManager;
    const LangOptions& lang = result.Context->getLangOpts();
    auto after = [&](SourceLocation token) { return Lexer::getLocForEndOfToken(token, 0, sm, lang); };
    for (const DynTypedNode& parent : result.Context->getParents(*construct)) {
      if (const auto* var = parent.get<VarDecl>(); var && var->getInit() == construct && var->getLocation().isFileID())
        return insertion(after(var->getLocation()), given);
      if (const auto* created = parent.get<CXXNewExpr>(); created && !created->isArray())
        if (const TypeSourceInfo* type = created->getAllocatedTypeSourceInfo())
          return insertion(after(type->getTypeLoc().getEndLoc()), given);
    }
    return llvm::SmallVector<Edit, 1>();
  };
}

// `Trainer trainer{fabric, model, &optimizer}`: an aggregate that holds an
// optimizer gets the Fabric member first, so its brace initialisers do too.
EditGenerator passFabricToAggregate() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* init = result.Nodes.getNodeAs<InitListExpr>("aggregate");
    std::string name = edits::fabricNameAt(result);
    return insertion(init->getLBraceLoc().getLocWithOffset(1), name + (init->getNumInits() > 0 ? ", " : ""));
  };
}

// A brace list written in the source (the semantic and the syntactic form of
// one list share their braces: the engine keeps one of their edits).
AST_MATCHER(InitListExpr, isSpelledBraceList) {
  return Node.getLBraceLoc().isValid() && Node.getLBraceLoc().isFileID();
}

// --- Functions ---------------------------------------------------------------

llvm::SmallVector<Edit, 1> withFact(llvm::SmallVector<Edit, 1> edits, threading::Fact fact) {
  for (Edit& edit : edits) edit.Metadata = fact;
  return edits;
}

// `fabric::Fabric& fabric` first in a declaration's parameter list.
EditGenerator addFunctionParameter() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* function = result.Nodes.getNodeAs<FunctionDecl>("function");
    threading::Fact fact{threading::Fact::Parameter, threading::functionKey(*function),
                         threading::displayName(*function), function->isThisDeclarationADefinition(), ""};
    fact.external = function->isExternallyVisible();
    if (function->getNumParams() > 0)
      return withFact(
          insertion(edits::beforeLeadingComments(function->getParamDecl(0)->getBeginLoc(), *result.SourceManager),
                    "fabric::Fabric& fabric, "),
          fact);
    FunctionTypeLoc type = function->getFunctionTypeLoc();
    if (!type) return llvm::SmallVector<Edit, 1>();
    // `f()` or `f(void)`: the parameter replaces whatever is between the parentheses.
    Edit edit;
    edit.Range = CharSourceRange::getCharRange(type.getLParenLoc().getLocWithOffset(1), type.getRParenLoc());
    edit.Replacement = "fabric::Fabric& fabric";
    edit.Metadata = fact;
    return llvm::SmallVector<Edit, 1>{edit};
  };
}

// `fabric` first among a call's arguments.
EditGenerator passFabricToFunction() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* call = result.Nodes.getNodeAs<CallExpr>("call");
    const auto* callee = result.Nodes.getNodeAs<FunctionDecl>("callee");
    threading::Fact fact{threading::Fact::Argument, threading::functionKey(*callee), threading::displayName(*callee),
                         false, ""};
    std::string name = edits::fabricNameAt(result);
    if (call->getNumArgs() > 0 && !isa<CXXDefaultArgExpr>(call->getArg(0)))
      return withFact(
          insertion(edits::beforeLeadingComments(call->getArg(0)->getBeginLoc(), *result.SourceManager), name + ", "),
          fact);
    return withFact(insertion(call->getRParenLoc(), name), fact);
  };
}

// A function used other than by a call (its address taken, passed as a
// callback): a parameter added to it would not reach it there.
EditGenerator blockThreading() {
  return [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* function = result.Nodes.getNodeAs<FunctionDecl>("function");
    const auto* use = result.Nodes.getNodeAs<Expr>("use");
    const SourceManager& sm = *result.SourceManager;
    SourceLocation at = sm.getExpansionLoc(use->getBeginLoc());
    std::string where =
        llvm::sys::path::filename(sm.getFilename(at)).str() + ":" + std::to_string(sm.getExpansionLineNumber(at));
    Edit edit;
    edit.Range = CharSourceRange::getCharRange(use->getBeginLoc(), use->getBeginLoc());
    edit.Metadata = threading::Fact{
        threading::Fact::Blocks, threading::functionKey(*function), threading::displayName(*function), false,
        "is used other than by a call at " + where + " (a function pointer or callback cannot pass the Fabric)"};
    return llvm::SmallVector<Edit, 1>{edit};
  };
}

// Whether the reference is the callee of a call (through the implicit
// function-to-pointer decay and parentheses).
AST_MATCHER(DeclRefExpr, isCalleeOfCall) {
  ASTContext& context = Finder->getASTContext();
  DynTypedNode current = DynTypedNode::create(Node);
  for (int depth = 0; depth < 8; ++depth) {
    DynTypedNodeList parents = context.getParents(current);
    if (parents.empty()) return false;
    const DynTypedNode& parent = parents[0];
    if (const auto* call = parent.get<CallExpr>()) return call->getCallee()->IgnoreParenImpCasts() == &Node;
    if (!parent.get<ImplicitCastExpr>() && !parent.get<ParenExpr>()) return false;
    current = parent;
  }
  return false;
}

}  // namespace

Rule makeThreadFabricRule() {
  auto ctor = cxxConstructorDecl(ofClass(classNeedingFabric()), unless(isImplicit()), unless(isCopyConstructor()),
                                 unless(isMoveConstructor()), unless(isDeleted()), unless(isDefaulted()))
                  .bind("ctor");
  // A derived trainer (its base keeps the Fabric): constructors take it and
  // pass it on; it is constructed with it.
  auto trains = anyOf(classNeedingFabric(), classInheritingFabric());
  auto derivedCtor = cxxConstructorDecl(ofClass(classInheritingFabric()), unless(isImplicit()),
                                        unless(isCopyConstructor()), unless(isMoveConstructor()), unless(isDeleted()),
                                        unless(isDefaulted()), unless(isInstantiated()))
                         .bind("ctor");
  auto construct =
      cxxConstructExpr(hasDeclaration(cxxConstructorDecl(ofClass(cxxRecordDecl(trains)), unless(isCopyConstructor()),
                                                         unless(isMoveConstructor()))),
                       inFabricScope(), unless(hasAncestor(cxxMethodDecl(ofClass(classNeedingFabric())))))
          .bind("construct");
  // `std::make_unique<Trainer>(config)`: the construction itself is inside
  // the standard library; the Fabric goes into the call's arguments.
  auto factory =
      callExpr(callee(functionDecl(hasAnyName("::std::make_unique", "::std::make_shared"),
                                   hasTemplateArgument(0, refersToType(recordTypeOf(cxxRecordDecl(trains)))))),
               inFabricScope(), unless(hasAncestor(cxxMethodDecl(ofClass(classNeedingFabric())))))
          .bind("factory");
  auto aggregate =
      initListExpr(isSpelledBraceList(), hasType(recordTypeOf(cxxRecordDecl(classNeedingFabric(), isAggregateClass()))),
                   inFabricScope(), unless(hasAncestor(cxxMethodDecl(ofClass(classNeedingFabric())))))
          .bind("aggregate");
  EditGenerator passFabricToFactory = [](const MatchResult& result) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto* call = result.Nodes.getNodeAs<CallExpr>("factory");
    std::string name = edits::fabricNameAt(result);
    if (call->getNumArgs() > 0)
      return insertion(edits::beforeLeadingComments(call->getArg(0)->getBeginLoc(), *result.SourceManager),
                       name + ", ");
    return insertion(call->getRParenLoc(), name);
  };
  auto function = functionDecl(threadableFunction(), unless(isInstantiated())).bind("function");
  auto call = callExpr(callee(functionDecl(threadableFunction()).bind("callee")), inFabricScope(),
                       unless(cxxOperatorCallExpr()))
                  .bind("call");
  auto otherUse =
      declRefExpr(to(functionDecl(threadableFunction()).bind("function")), unless(isCalleeOfCall())).bind("use");
  auto explain =
      cat("the training loop lives in this class: the Fabric is passed in and kept "
          "as a member");
  auto explainFunction = cat("this function's code uses the Fabric: it is passed in as a parameter");
  return {
      "fabric-thread-fabric", "+",
      "When a class that holds the optimizer runs the training loop (a Trainer in its own "
      "files), pass the Fabric in: a fabric::Fabric& member, a constructor parameter in the "
      "declaration and the definition, the member initialised from it, and `fabric` at the "
      "place main constructs the class (also through std::make_unique/make_shared); a class "
      "that declares no constructor (its default member initialisers make the model and the "
      "optimizer) gets one that takes the Fabric. A class derived from such a class (a task's "
      "trainer over a BaseTrainer) uses the base's member in its overrides; its constructors take "
      "the Fabric and pass it to the base, and it is constructed with it. Any other "
      "function whose code needs the Fabric (a train() or test() called from main) gets a "
      "fabric::Fabric& parameter in every declaration and the Fabric at every call, when all "
      "its callers have or get one; otherwise what needed it is reported.",
      RuleKind::Rewrite,
      applyFirst<std::string>({
          makeRule(
              cxxRecordDecl(classNeedingFabric(), declaresNoConstructor(), unless(isAggregateClass())).bind("class"),
              flatten(addMember(), addConstructor()), explain),
          makeRule(cxxRecordDecl(classNeedingFabric()).bind("class"), addMember(), explain),
          // A definition gets the parameter and the initialiser together.
          // A class with an optimizer of its own over a base that keeps one
          // too hands the Fabric to that base as well (nothing to hand on
          // where no base keeps one).
          makeRule(cxxConstructorDecl(ctor, isDefinition()),
                   flatten(addParameter(), initialiseMember(), passFabricToBase()), explain),
          makeRule(ctor, addParameter(), explain),
          makeRule(cxxConstructorDecl(derivedCtor, isDefinition()), flatten(addParameter(), passFabricToBase()),
                   cat("this class's base keeps the Fabric: its constructor takes it and passes it on")),
          makeRule(derivedCtor, addParameter(),
                   cat("this class's base keeps the Fabric: its constructor takes it and passes it on")),
          makeRule(construct, passFabric(), explain),
          makeRule(factory, passFabricToFactory, explain),
          makeRule(aggregate, passFabricToAggregate(), explain),
          makeRule(function, addFunctionParameter(), explainFunction),
          makeRule(call, passFabricToFunction(), explainFunction),
          makeRule(otherUse, blockThreading(), explainFunction),
      })};
}

}  // namespace fabricize
