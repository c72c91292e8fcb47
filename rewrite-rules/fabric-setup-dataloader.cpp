// Step 3 (data): make_data_loader becomes a Fabric loader: distributed
// sampler when there are several ranks, batches delivered on the device.
// Where the program spells the loader's type (a member
// `std::unique_ptr<torch::data::StatelessDataLoader<Set, RandomSampler>>`
// assigned in a prepare_data(), an alias, a parameter), the type follows:
// `fabric::DataLoader<Set>`, what fabric.setup_dataloader returns.
#include "rule-helpers/Edits.h"
#include "rule-helpers/Matchers.h"
#include "RuleFactories.h"

#include "clang/Lex/Lexer.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

namespace {

bool builtByUnmigratedCall(clang::SourceRange spelled, clang::ASTContext& context);

// torch::data::StatelessDataLoader<Dataset, Sampler> with a sampler type
// fabric.setup_dataloader takes over (RandomSampler, SequentialSampler): the
// type of what a migrated make_data_loader<Sampler>(...) call returns;
// unless it is where a call this rule leaves as it is (a sampler object of
// part of the data set) stores its loader: the type and the call agree.
AST_MATCHER(clang::TemplateSpecializationTypeLoc, spellsMigratedLoaderType) {
  const clang::TemplateSpecializationType* type = Node.getTypePtr();
  const clang::TemplateDecl* decl = type->getTemplateName().getAsTemplateDecl();
  if (!decl || decl->getQualifiedNameAsString() != "torch::data::StatelessDataLoader") return false;
  auto arguments = type->template_arguments();
  if (arguments.size() != 2 || arguments[1].getKind() != clang::TemplateArgument::Type) return false;
  const clang::CXXRecordDecl* sampler = arguments[1].getAsType()->getAsCXXRecordDecl();
  if (!sampler) return false;
  std::string name = sampler->getQualifiedNameAsString();
  if (name != "torch::data::samplers::RandomSampler" && name != "torch::data::samplers::SequentialSampler")
    return false;
  return !builtByUnmigratedCall(Node.getSourceRange(), Finder->getASTContext());
}

// The spelled type `<qualifier>StatelessDataLoader<Set, Sampler>` as two
// pieces: the qualified template name, and `, Sampler` after the data set.
// Not the whole range: its `>` is often half of a `>>` token
// (`std::unique_ptr<StatelessDataLoader<Set, Sampler>>`), which no edit can
// end in.
RangeSelector loaderTemplateName(std::string id) {
  return [id](const clang::ast_matchers::MatchFinder::MatchResult& result) -> llvm::Expected<clang::CharSourceRange> {
    const auto* spelled = result.Nodes.getNodeAs<clang::TypeLoc>(id);
    if (!spelled) return llvm::createStringError(llvm::inconvertibleErrorCode(), "no loader type bound");
    auto loader = spelled->getAsAdjusted<clang::TemplateSpecializationTypeLoc>();
    return clang::CharSourceRange::getCharRange(spelled->getBeginLoc(), loader.getLAngleLoc());
  };
}
RangeSelector loaderSamplerArgument(std::string id) {
  return [id](const clang::ast_matchers::MatchFinder::MatchResult& result) -> llvm::Expected<clang::CharSourceRange> {
    const auto* spelled = result.Nodes.getNodeAs<clang::TypeLoc>(id);
    if (!spelled) return llvm::createStringError(llvm::inconvertibleErrorCode(), "no loader type bound");
    auto loader = spelled->getAsAdjusted<clang::TemplateSpecializationTypeLoc>();
    const clang::SourceManager& sm = *result.SourceManager;
    const clang::LangOptions& lang = result.Context->getLangOpts();
    auto endOf = [&](clang::SourceLocation token) { return clang::Lexer::getLocForEndOfToken(token, 0, sm, lang); };
    return clang::CharSourceRange::getCharRange(endOf(loader.getArgLoc(0).getSourceRange().getEnd()),
                                                endOf(loader.getArgLoc(1).getSourceRange().getEnd()));
  };
}

// Whether the sampler argument is built over a size the program asked a
// data set for (`RandomSampler(*dataset.size())`, or a variable made so,
// passed by name or moved): it then samples the whole data set. A sampler
// of a size written as a number may cover part of it.
bool samplesWholeDataSet(const clang::Expr& sampler, clang::ASTContext& context) {
  using namespace clang::ast_matchers;
  // Each as itself or below (hasArgument looks through implicit casts, so
  // the argument may be the very node wanted).
  auto itselfOrBelow = [](auto matcher) { return expr(anyOf(matcher, hasDescendant(matcher))); };
  auto asksSize = itselfOrBelow(cxxMemberCallExpr(callee(cxxMethodDecl(hasName("size")))));
  auto sizeValue = expr(anyOf(asksSize, itselfOrBelow(declRefExpr(to(varDecl(hasInitializer(asksSize)))))));
  auto built = cxxConstructExpr(hasArgument(0, sizeValue));
  auto samplerObject =
      expr(anyOf(itselfOrBelow(built), itselfOrBelow(declRefExpr(to(varDecl(hasInitializer(itselfOrBelow(built))))))));
  return !clang::ast_matchers::match(samplerObject, sampler, context).empty();
}

// make_data_loader<Dataset, Sampler>(dataset, sampler, options) with a
// RandomSampler or SequentialSampler object over the whole data set: that is
// what fabric.setup_dataloader<Sampler> builds itself (its distributed
// version on several ranks), so the object is not needed.
std::string standardSamplerOf(const clang::CallExpr& call, clang::ASTContext& context) {
  const auto* function = call.getDirectCallee();
  const clang::TemplateArgumentList* arguments = function ? function->getTemplateSpecializationArgs() : nullptr;
  if (!arguments || arguments->size() != 2 || call.getNumArgs() != 3) return "";
  const clang::TemplateArgument& sampler = arguments->get(1);
  if (sampler.getKind() != clang::TemplateArgument::Type) return "";
  const clang::CXXRecordDecl* record = sampler.getAsType()->getAsCXXRecordDecl();
  if (!record) return "";
  std::string name = record->getQualifiedNameAsString();
  if (name != "torch::data::samplers::RandomSampler" && name != "torch::data::samplers::SequentialSampler") return "";
  return samplesWholeDataSet(*call.getArg(1), context) ? name : "";
}

// Where the type of what `call` is stored is spelled: the declaration the
// call initialises or is assigned to (`loader_ = make_data_loader(...)`),
// and the aliases its type goes through (`std::unique_ptr<Loader>`, `using
// Loader = StatelessDataLoader<...>`).
void addSpellings(clang::QualType type, std::vector<clang::SourceRange>& ranges, int depth = 0) {
  if (type.isNull() || depth > 8) return;
  if (const auto* alias = type->getAs<clang::TypedefType>()) {
    ranges.push_back(alias->getDecl()->getSourceRange());
    addSpellings(alias->getDecl()->getUnderlyingType(), ranges, depth + 1);
  }
  if (const auto* specialization = type->getAs<clang::TemplateSpecializationType>())
    for (const clang::TemplateArgument& argument : specialization->template_arguments())
      if (argument.getKind() == clang::TemplateArgument::Type) addSpellings(argument.getAsType(), ranges, depth + 1);
}

std::vector<clang::SourceRange> destinationSpellings(const clang::CallExpr& call, clang::ASTContext& context) {
  std::vector<clang::SourceRange> ranges;
  const clang::DeclaratorDecl* destination = nullptr;
  clang::DynTypedNode current = clang::DynTypedNode::create(call);
  for (int depth = 0; depth < 6 && !destination; ++depth) {
    auto parents = context.getParents(current);
    if (parents.empty()) break;
    current = parents[0];
    if (const auto* var = current.get<clang::VarDecl>()) destination = var;
    if (const auto* assignment = current.get<clang::CXXOperatorCallExpr>();
        assignment && assignment->getOperator() == clang::OO_Equal && assignment->getNumArgs() == 2) {
      const clang::Expr* target = assignment->getArg(0)->IgnoreParenImpCasts();
      if (const auto* member = llvm::dyn_cast<clang::MemberExpr>(target))
        destination = llvm::dyn_cast<clang::DeclaratorDecl>(member->getMemberDecl());
      else if (const auto* reference = llvm::dyn_cast<clang::DeclRefExpr>(target))
        destination = llvm::dyn_cast<clang::DeclaratorDecl>(reference->getDecl());
      if (!destination) break;
    }
  }
  if (!destination) return ranges;
  if (const clang::TypeSourceInfo* spelled = destination->getTypeSourceInfo())
    ranges.push_back(spelled->getTypeLoc().getSourceRange());
  addSpellings(destination->getType(), ranges);
  return ranges;
}

// Whether the loader type spelled at `spelled` holds what a make_data_loader
// call the rule leaves (a sampler object it does not take over) returns.
bool builtByUnmigratedCall(clang::SourceRange spelled, clang::ASTContext& context) {
  using namespace clang::ast_matchers;
  auto calls = clang::ast_matchers::match(callExpr(callee(functionDecl(hasName("::torch::data::make_data_loader"))),
                                                   unless(argumentCountIs(2)), unless(isExpansionInSystemHeader()))
                                              .bind("call"),
                                          context);
  const clang::SourceManager& sm = context.getSourceManager();
  const auto within = [&](clang::SourceRange inner, clang::SourceRange outer) {
    clang::SourceLocation begin = sm.getExpansionLoc(inner.getBegin()), end = sm.getExpansionLoc(inner.getEnd());
    clang::SourceLocation from = sm.getExpansionLoc(outer.getBegin()), to = sm.getExpansionLoc(outer.getEnd());
    return !sm.isBeforeInTranslationUnit(begin, from) && !sm.isBeforeInTranslationUnit(to, end);
  };
  for (const auto& nodes : calls) {
    const auto* call = nodes.getNodeAs<clang::CallExpr>("call");
    if (!standardSamplerOf(*call, context).empty()) continue;  // migrated
    for (clang::SourceRange range : destinationSpellings(*call, context))
      if (range.isValid() && within(spelled, range)) return true;
  }
  return false;
}

AST_MATCHER(clang::CallExpr, takesStandardSamplerObject) {
  return !standardSamplerOf(Node, Finder->getASTContext()).empty();
}

Stencil samplerOfCall() {
  return run([](const clang::ast_matchers::MatchFinder::MatchResult& result) -> llvm::Expected<std::string> {
    return standardSamplerOf(*result.Nodes.getNodeAs<clang::CallExpr>("call"), *result.Context);
  });
}

}  // namespace

Rule makeSetupDataLoaderRule() {
  auto makeDataLoader = callExpr(callee(functionDecl(hasName("::torch::data::make_data_loader"))),
                                 callee(expr(ignoringImplicit(declRefExpr().bind("callee")))), inFabricScope())
                            .bind("call");
  return {"fabric-setup-dataloader", "3",
          "Replace torch::data::make_data_loader<Sampler>(dataset, options) with "
          "fabric.setup_dataloader<Sampler>(dataset, options): a distributed sampler on several "
          "ranks (reshuffled every epoch) and batches that arrive on the device. A RandomSampler or "
          "SequentialSampler object built over the data set's size is that sampler (its object is no "
          "longer passed); a sampler object of another size or kind is reported, and where its loader "
          "is stored keeps its type.",
          RuleKind::Rewrite,
          applyFirst<std::string>({
              makeRule(elaboratedTypeLoc(hasNamedTypeLoc(templateSpecializationTypeLoc(spellsMigratedLoaderType())))
                           .bind("loaderType"),
                       flatten(changeTo(loaderTemplateName("loaderType"), cat("fabric::DataLoader")),
                               changeTo(loaderSamplerArgument("loaderType"), cat(""))),
                       cat("the loader's type follows the migration: fabric.setup_dataloader returns a "
                           "fabric::DataLoader of the same data set")),
              makeRule(callExpr(makeDataLoader, argumentCountIs(2)),
                       changeTo(enclose(node("callee"), name("callee")), edits::fabricMember("setup_dataloader")),
                       cat("let the Fabric shard the data set and move batches to the device")),
              makeRule(callExpr(makeDataLoader, takesStandardSamplerObject(), hasArgument(0, expr().bind("dataset")),
                                hasArgument(2, expr().bind("options"))),
                       changeTo(node("call"), cat(edits::fabricMember("setup_dataloader"), "<", samplerOfCall(), ">(",
                                                  node("dataset"), ", ", node("options"), ")")),
                       cat("let the Fabric shard the data set and move batches to the device (it builds the "
                           "sampler the call was given, distributed on several ranks)")),
              // A sampler object of another kind: its sharding is the user's to decide.
              makeRule(makeDataLoader, noopEdit(node("call")),
                       cat("data loader with an explicit sampler object: not migrated; give each "
                           "rank its own shard (e.g. torch::data::samplers::DistributedRandomSampler "
                           "with fabric.world_size() and fabric.global_rank())")),
          })};
}

}  // namespace fabricize
