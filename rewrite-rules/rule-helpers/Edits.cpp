#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "rule-helpers/Threading.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/Stmt.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Basic/SourceManager.h"
#include "llvm/Support/Path.h"

#include <cctype>

namespace fabricize::edits {

using namespace clang;
using namespace clang::transformer;

std::string indentationAt(SourceLocation at, const SourceManager& sm) {
  auto [file, offset] = sm.getDecomposedLoc(sm.getExpansionLoc(at));
  bool invalid = false;
  llvm::StringRef text = sm.getBufferData(file, &invalid);
  if (invalid) return "";
  size_t lineStart = text.rfind('\n', offset);  // the last newline before `at`
  lineStart = lineStart == llvm::StringRef::npos ? 0 : lineStart + 1;
  llvm::StringRef before = text.slice(lineStart, offset);
  llvm::StringRef indent = before.take_while([](char c) { return c == ' ' || c == '\t'; });
  return indent.size() == before.size() ? indent.str() : std::string(before.size(), ' ');
}

Stencil indentOf(RangeSelector selector) {
  return run([selector](const ast_matchers::MatchFinder::MatchResult& result) -> llvm::Expected<std::string> {
    llvm::Expected<CharSourceRange> range = selector(result);
    if (!range) return range.takeError();
    const SourceManager& sm = *result.SourceManager;
    SourceLocation begin = sm.getExpansionLoc(range->getBegin());
    auto [file, offset] = sm.getDecomposedLoc(begin);
    bool invalid = false;
    llvm::StringRef buffer = sm.getBufferData(file, &invalid);
    if (invalid) return std::string();
    size_t lineStart = buffer.rfind('\n', offset);  // the last newline before the range
    lineStart = lineStart == llvm::StringRef::npos ? 0 : lineStart + 1;
    size_t end = lineStart;
    while (end < buffer.size() && (buffer[end] == ' ' || buffer[end] == '\t')) ++end;
    return buffer.slice(lineStart, end).str();
  });
}

// Where the Fabric goes in main: the first statement after the argument
// parsing main starts with (statements that read argc/argv and touch
// nothing of LibTorch), so `--help` and bad flags need no processes.
struct TopOfBlock {
  SourceLocation insertAt;  // start of its line (above its comments), or the statement
  std::string indent;
  bool onOwnLine = false;
};

namespace {

// Whether `statement` names a declaration of LibTorch (torch::, at::, c10::).
bool touchesLibTorch(const Stmt& statement, ASTContext& context) {
  using namespace ast_matchers;
  auto use = match::libTorchUse();
  return !ast_matchers::match(stmt(anyOf(use, hasDescendant(use))), statement, context).empty();
}

// The number of leading statements of main's body that parse arguments.
size_t argumentParsingStatements(const CompoundStmt& body, ASTContext& context) {
  const FunctionDecl* main = nullptr;
  for (const DynTypedNode& parent : context.getParents(body))
    if (const auto* function = parent.get<FunctionDecl>()) main = function;
  if (!main || !main->isMain() || main->getNumParams() == 0) return 0;
  using namespace ast_matchers;
  auto argument = declRefExpr(to(parmVarDecl(hasAncestor(functionDecl(isMain())))));
  size_t parsing = 0, index = 0;
  for (const Stmt* statement : body.body()) {
    if (touchesLibTorch(*statement, context)) break;
    ++index;
    if (!ast_matchers::match(stmt(anyOf(argument, hasDescendant(argument))), *statement, context).empty())
      parsing = index;
  }
  // Nothing would be left to run after the Fabric: keep it at the top.
  return parsing == body.size() ? 0 : parsing;
}

}  // namespace

static llvm::Expected<TopOfBlock> fabricPlace(const ast_matchers::MatchFinder::MatchResult& result,
                                              const std::string& id) {
  const auto* body = result.Nodes.getNodeAs<CompoundStmt>(id);
  if (!body || body->body_empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'" + id + "' is not a non-empty compound statement");
  const SourceManager& sm = *result.SourceManager;
  size_t skip = argumentParsingStatements(*body, *result.Context);
  const Stmt* first = body->body_begin()[skip];
  SourceLocation begin = sm.getExpansionLoc(first->getBeginLoc());
  auto [file, offset] = sm.getDecomposedLoc(begin);
  // Text before `first` on its line must be whitespace; the statement before
  // it (or the brace) ends the region its leading comments may occupy.
  SourceLocation previousEnd = skip == 0 ? body->getLBracLoc() : body->body_begin()[skip - 1]->getEndLoc();
  unsigned floorOffset = sm.getDecomposedLoc(sm.getExpansionLoc(previousEnd)).second;
  llvm::StringRef text = sm.getBufferData(file);
  auto lineStartOf = [&](unsigned at) {
    size_t nl = text.rfind('\n', at);  // the last newline before `at`
    return nl == llvm::StringRef::npos ? 0u : static_cast<unsigned>(nl + 1);
  };
  TopOfBlock top;
  unsigned lineStart = lineStartOf(offset);
  top.onOwnLine = lineStart > floorOffset && text.slice(lineStart, offset).trim().empty();
  top.indent = text.slice(lineStart, offset).str();
  if (!top.onOwnLine) {
    top.insertAt = begin;
    return top;
  }
  // Comment lines right above the statement belong to it: insert above them.
  while (lineStart > floorOffset + 1) {
    unsigned previous = lineStartOf(lineStart - 1);
    if (previous <= floorOffset) break;
    if (!text.slice(previous, lineStart - 1).trim().starts_with("//")) break;
    lineStart = previous;
  }
  top.insertAt = begin.getLocWithOffset(static_cast<int>(lineStart) - static_cast<int>(offset));
  return top;
}

RangeSelector fabricInsertionPoint(std::string id) {
  return [id](const ast_matchers::MatchFinder::MatchResult& result) -> llvm::Expected<CharSourceRange> {
    llvm::Expected<TopOfBlock> top = fabricPlace(result, id);
    if (!top) return top.takeError();
    return CharSourceRange::getCharRange(top->insertAt, top->insertAt);
  };
}

Stencil fabricInsertionStatement(std::string id, std::string statement) {
  return run([id, statement](const ast_matchers::MatchFinder::MatchResult& result) -> llvm::Expected<std::string> {
    llvm::Expected<TopOfBlock> top = fabricPlace(result, id);
    if (!top) return top.takeError();
    // Continuation lines keep their place relative to the block's indentation.
    std::string text = statement;
    for (size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at + 1))
      text.insert(at + 1, top->indent);
    return top->onOwnLine ? top->indent + text + "\n" : text + " ";
  });
}

namespace {

bool isFabricType(QualType type) {
  type = type.getNonReferenceType();
  const auto* record = type->getAsCXXRecordDecl();
  return record && record->getQualifiedNameAsString() == "fabric::Fabric";
}

// The functions around `node`, innermost first, walking up through lambdas
// to the function whose locals and parameters the lambda can capture.
std::vector<const FunctionDecl*> enclosingFunctions(const DynTypedNode& node, ASTContext& context) {
  std::vector<const FunctionDecl*> functions;
  if (const auto* function = node.get<FunctionDecl>()) functions.push_back(function);  // a match on a function
  std::vector<DynTypedNode> pending{node};
  while (!pending.empty()) {
    DynTypedNode current = pending.back();
    pending.pop_back();
    for (const DynTypedNode& parent : context.getParents(current)) {
      if (const auto* function = parent.get<FunctionDecl>()) functions.push_back(function);
      pending.push_back(parent);
    }
  }
  return functions;
}

bool isLambdaBody(const FunctionDecl& function) {
  const auto* method = llvm::dyn_cast<CXXMethodDecl>(&function);
  return method && method->getParent()->isLambda();
}

// Whether `node` comes before the place fabric-insert gives the Fabric in
// `main` (the argument parsing main starts with).
bool beforeFabricOfMain(const DynTypedNode& node, const FunctionDecl& main, ASTContext& context) {
  const auto* body = llvm::dyn_cast_or_null<CompoundStmt>(main.getBody());
  if (!body) return false;
  size_t parsing = argumentParsingStatements(*body, context);
  if (parsing == 0) return false;
  const SourceManager& sm = context.getSourceManager();
  SourceLocation first = sm.getExpansionLoc(body->body_begin()[parsing]->getBeginLoc());
  return sm.isBeforeInTranslationUnit(sm.getExpansionLoc(node.getSourceRange().getBegin()), first);
}

}  // namespace

namespace {

// The Fabric where `node` is: its name when the code there has one (or
// main is about to, through fabric-insert), else the function that needs
// one given (the name is then the parameter's, `fabric`).
struct Scope {
  std::string name = "fabric";
  std::optional<threading::Need> need;
  bool member = false;  // `name` is a member of the class around: reached through `this`
};

// The innermost lambda around `node` whose body cannot name a Fabric of
// the function around it: one that captures by name (`[&model, &opt]`)
// without a Fabric among them. `capturesThis`: it still reaches members.
const LambdaExpr* lambdaWithoutFabric(const DynTypedNode& node, ASTContext& context, bool& capturesThis) {
  DynTypedNode current = node;
  for (int depth = 0; depth < 256; ++depth) {
    DynTypedNodeList parents = context.getParents(current);
    if (parents.empty()) return nullptr;
    if (const auto* lambda = parents[0].get<LambdaExpr>()) {
      bool sees = lambda->getCaptureDefault() == LCD_ByRef;
      capturesThis = lambda->getCaptureDefault() != LCD_None;
      for (const LambdaCapture& capture : lambda->explicit_captures()) {
        capturesThis = capturesThis || capture.capturesThis();
        sees = sees || (capture.capturesVariable() && capture.getCaptureKind() == LCK_ByRef &&
                        isFabricType(capture.getCapturedVar()->getType()));
      }
      if (!sees) return lambda;
    }
    current = parents[0];
  }
  return nullptr;
}

Scope fabricScopeOf(const DynTypedNode& node, ASTContext& context) {
  Scope scope;
  bool capturesThis = false;
  if (const LambdaExpr* lambda = lambdaWithoutFabric(node, context, capturesThis)) {
    const SourceManager& sm = context.getSourceManager();
    SourceLocation at = sm.getExpansionLoc(lambda->getBeginLoc());
    std::string where =
        llvm::sys::path::filename(sm.getFilename(at)).str() + ":" + std::to_string(sm.getExpansionLineNumber(at));
    // Reaching a member Fabric through `this` is fine; anything else is
    // not captured.
    bool throughMember = false;
    if (capturesThis)
      for (const FunctionDecl* function : enclosingFunctions(node, context))
        if (const auto* method = llvm::dyn_cast<CXXMethodDecl>(function); method && !method->getParent()->isLambda())
          throughMember = match::fabricHolderOf(*method->getParent()) != nullptr;
    if (!throughMember) {
      // The lambda gets the Fabric of the code around it added to its
      // captures (`[this, &x]` -> `[this, &x, &fabric]`, a member's through
      // `this`), as a person would write it; lambdas around it in turn.
      SourceLocation close = lambda->getIntroducerRange().getEnd();
      if (close.isValid() && close.isFileID()) {
        Scope outer = fabricScopeOf(DynTypedNode::create(*lambda), context);
        const bool empty = lambda->explicit_captures().empty() && lambda->getCaptureDefault() == LCD_None;
        const std::string capture = outer.member ? "this" : "&" + outer.name;
        threading::recordCapture({close, empty ? capture : ", " + capture});
        return outer;
      }
      scope.need = threading::Need{"<lambda at " + where + ">", "the lambda at " + where,
                                   "captures by name and not the Fabric, in a macro: capture it (`[&]` or `&fabric`)"};
      return scope;
    }
  }
  std::vector<const FunctionDecl*> functions = enclosingFunctions(node, context);
  for (const FunctionDecl* function : functions) {
    for (const ParmVarDecl* parameter : function->parameters())
      if (isFabricType(parameter->getType()) && !parameter->getName().empty()) {
        scope.name = parameter->getName().str();
        return scope;
      }
    if (function->hasBody())
      for (const auto& nodes :
           ast_matchers::match(ast_matchers::stmt(ast_matchers::forEachDescendant(ast_matchers::varDecl().bind("var"))),
                               *function->getBody(), context)) {
        const auto* var = nodes.getNodeAs<VarDecl>("var");
        if (!isFabricType(var->getType())) continue;
        scope.name = var->getName().str();
        const SourceManager& sm = context.getSourceManager();
        if (sm.isBeforeInTranslationUnit(sm.getExpansionLoc(node.getSourceRange().getBegin()),
                                         sm.getExpansionLoc(var->getBeginLoc())))
          scope.need = threading::Need{"<before the Fabric>", "code before the Fabric is created",
                                       "runs before the Fabric is created"};
        return scope;
      }
    // A lambda's closure holds its captures (an optimizer captured by
    // reference), not members the Fabric can join: the function around it
    // gives the Fabric.
    // The class's Fabric member, or its base's (a BaseTrainer's, used by
    // the overrides of a derived trainer).
    if (const auto* method = llvm::dyn_cast<CXXMethodDecl>(function); method && !method->getParent()->isLambda())
      if (const CXXRecordDecl* holder = match::fabricHolderOf(*method->getParent())) {
        scope.name = threadedMemberName(*holder);
        for (const FieldDecl* field : holder->fields())
          if (isFabricType(field->getType())) scope.name = field->getName().str();
        scope.member = true;
        return scope;
      }
  }
  // No Fabric here yet: main gets one from fabric-insert; any other function
  // only if it can be given one (Threading.h).
  const FunctionDecl* owner = nullptr;
  for (const FunctionDecl* function : functions)
    if (!isLambdaBody(*function)) {
      owner = function;
      break;
    }
  if (!owner && !functions.empty()) owner = functions.front();
  if (!owner) {
    scope.need = threading::Need{"<outside any function>", "code outside any function", "is not in a function"};
    return scope;
  }
  if (owner->isMain()) {
    using namespace ast_matchers;
    if (!ast_matchers::match(functionDecl(match::mainNeedingFabric()), *owner, context).empty()) {
      if (beforeFabricOfMain(node, *owner, context))
        scope.need = threading::Need{"<main before its Fabric>", "main's argument parsing",
                                     "runs before main creates the Fabric"};
    } else if (!ast_matchers::match(functionDecl(match::mainFileDeclaresNoFabric()), *owner, context).empty()) {
      scope.need = threading::Need{threading::functionKey(*owner), "main", ""};  // fabric-insert declares one if needed
    } else {
      scope.need =
          threading::Need{threading::functionKey(*owner), "main", "is in a file that creates its Fabric elsewhere"};
    }
    return scope;
  }
  scope.need =
      threading::Need{threading::functionKey(*owner), threading::displayName(*owner), threading::blockedReason(*owner)};
  return scope;
}

}  // namespace

std::string fabricNameAt(const ast_matchers::MatchFinder::MatchResult& result) {
  auto root = result.Nodes.getMap().find(RootID);
  if (root == result.Nodes.getMap().end()) return "fabric";
  Scope scope = fabricScopeOf(root->second, *result.Context);
  if (scope.need) threading::recordNeed(*scope.need);
  return scope.name;
}

std::string fabricNameWhereMigrated(const ast_matchers::MatchFinder::MatchResult& result) {
  auto root = result.Nodes.getMap().find(RootID);
  if (root == result.Nodes.getMap().end()) return "fabric";
  Scope scope = fabricScopeOf(root->second, *result.Context);
  if (scope.need) {
    scope.need->uses = false;
    threading::recordNeed(*scope.need);
  }
  return scope.name;
}

std::optional<threading::Need> fabricNeededAt(const ast_matchers::MatchFinder::MatchResult& result) {
  auto root = result.Nodes.getMap().find(RootID);
  if (root == result.Nodes.getMap().end()) return std::nullopt;
  // A match on a declaration (a class, a function) or a spelled type is not
  // code that runs.
  if (root->second.get<Decl>() || root->second.get<TypeLoc>() ||
      enclosingFunctions(root->second, *result.Context).empty())
    return std::nullopt;
  return fabricScopeOf(root->second, *result.Context).need;
}

std::string threadedMemberName(const CXXRecordDecl& record) {
  for (const FieldDecl* field : record.fields())
    if (field->getName().ends_with("_")) return "fabric_";
  return "fabric";
}

Stencil fabricMember(std::string member) {
  return run([member](const ast_matchers::MatchFinder::MatchResult& result) -> llvm::Expected<std::string> {
    return fabricNameAt(result) + "." + member;
  });
}

void addScopeNeed(const ast_matchers::MatchFinder::MatchResult& result, bool hasEdits, threading::MatchNeeds& needs) {
  if (!hasEdits || threading::isThreadingEdit(needs)) return;
  for (const threading::Fact& fact : needs.facts)
    if (fact.kind == threading::Fact::Standalone) return;
  std::optional<threading::Need> need = fabricNeededAt(result);
  if (!need) return;
  need->uses = false;
  for (const threading::Need& known : needs.needs)
    if (known.function == need->function) return;
  needs.needs.push_back(std::move(*need));
}

ASTEdit declaringFabricInMain(ASTEdit edit) {
  return withMetadata(std::move(edit), [](const ast_matchers::MatchFinder::MatchResult& result) -> llvm::Any {
    const auto* main = result.Nodes.getNodeAs<FunctionDecl>("main");
    return threading::Fact{threading::Fact::Declare, main ? threading::functionKey(*main) : "", "main", true, ""};
  });
}

ASTEdit optionalEdit(ASTEdit edit) {
  return withMetadata(std::move(edit), [](const ast_matchers::MatchFinder::MatchResult&) -> llvm::Any {
    return threading::Fact{threading::Fact::Optional, "", "", false, ""};
  });
}

ASTEdit standaloneEdit(ASTEdit edit) {
  return withMetadata(std::move(edit), [](const ast_matchers::MatchFinder::MatchResult&) -> llvm::Any {
    return threading::Fact{threading::Fact::Standalone, "", "", false, ""};
  });
}

Edit statementBefore(const Stmt& before, const std::string& statement, const SourceManager& sm) {
  SourceLocation at = sm.getExpansionLoc(before.getBeginLoc());
  auto [file, offset] = sm.getDecomposedLoc(at);
  llvm::StringRef text = sm.getBufferData(file);
  size_t lineStart = offset == 0 ? 0 : text.rfind('\n', offset - 1);
  lineStart = lineStart == llvm::StringRef::npos ? 0 : lineStart + 1;
  const bool ownLine = offset == 0 || text.slice(lineStart, offset).trim().empty();
  Edit edit;
  edit.Range = CharSourceRange::getCharRange(at, at);
  edit.Replacement = ownLine ? statement + "\n" + indentationAt(at, sm) : statement + " ";
  return edit;
}

SourceLocation beforeLeadingComments(SourceLocation at, const SourceManager& sm) {
  // In a macro's argument: where it is spelled; in a macro's body: as it is.
  if (at.isMacroID()) {
    if (!sm.isMacroArgExpansion(at)) return at;
    at = sm.getSpellingLoc(at);
  }
  auto [file, offset] = sm.getDecomposedLoc(at);
  llvm::StringRef text = sm.getBufferData(file);
  size_t position = offset;
  for (;;) {
    size_t before = position;
    while (before > 0 && (text[before - 1] == ' ' || text[before - 1] == '\t')) --before;
    if (before < 2 || text.substr(before - 2, 2) != "*/") break;
    size_t open = text.substr(0, before - 2).rfind("/*");
    if (open == llvm::StringRef::npos || text.slice(open, before).contains('\n')) break;
    position = open;
  }
  return at.getLocWithOffset(static_cast<int>(position) - static_cast<int>(offset));
}

ASTEdit removeStatement(std::string id) { return changeTo(statement(std::move(id)), cat("")); }

static bool isInteger(const std::string& text) {
  if (text.empty()) return false;
  size_t i = text[0] == '-' ? 1 : 0;
  if (i == text.size()) return false;
  for (; i < text.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return false;
  return true;
}

std::string optionsExpression(const FabricOptions& options) {
  std::string text = "fabric::Options()";
  text += ".accelerator(\"" + options.accelerator + "\")";
  text += isInteger(options.devices) ? ".devices(" + options.devices + ")" : ".devices(\"" + options.devices + "\")";
  text += ".strategy(\"" + options.strategy + "\")";
  text += ".precision(\"" + options.precision + "\")";
  if (!options.num_nodes.empty()) text += ".num_nodes(" + options.num_nodes + ")";
  return text;
}

std::string fabricDeclaration(const FabricOptions& options) {
  // Short enough for one line, or broken like the docs write it: the
  // hardware choice, then the training choice, aligned under Options.
  const std::string head = "fabric::Fabric fabric(";
  std::string whole = head + optionsExpression(options) + ");";
  if (whole.size() <= 90) return whole;
  std::string devices =
      isInteger(options.devices) ? ".devices(" + options.devices + ")" : ".devices(\"" + options.devices + "\")";
  std::string text = head + "fabric::Options().accelerator(\"" + options.accelerator + "\")" + devices;
  if (!options.num_nodes.empty()) text += ".num_nodes(" + options.num_nodes + ")";
  text += "\n" + std::string(head.size() + 4, ' ') + ".strategy(\"" + options.strategy + "\").precision(\"" +
          options.precision + "\"));";
  return text;
}

}  // namespace fabricize::edits
