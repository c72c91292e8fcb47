// Step 3 (data): make_data_loader becomes a Fabric loader: distributed
// sampler when there are several ranks, batches delivered on the device.
// Where the program spells the loader's type (a member
// `std::unique_ptr<torch::data::StatelessDataLoader<Set, RandomSampler>>`
// assigned in a prepare_data(), an alias, a parameter), the type follows:
// `fabric::DataLoader<Set>`, what fabric.setup_dataloader returns.
#include "Edits.h"
#include "Matchers.h"
#include "RuleFactories.h"

#include "clang/Lex/Lexer.h"

namespace fabricize {

using namespace clang::transformer;
using namespace match;

namespace {

// torch::data::StatelessDataLoader<Dataset, Sampler> with a sampler type
// fabric.setup_dataloader takes over (RandomSampler, SequentialSampler): the
// type of what a migrated make_data_loader<Sampler>(...) call returns.
AST_MATCHER(clang::TemplateSpecializationTypeLoc, spellsMigratedLoaderType) {
  const clang::TemplateSpecializationType* type = Node.getTypePtr();
  const clang::TemplateDecl* decl = type->getTemplateName().getAsTemplateDecl();
  if (!decl || decl->getQualifiedNameAsString() != "torch::data::StatelessDataLoader") return false;
  auto arguments = type->template_arguments();
  if (arguments.size() != 2 || arguments[1].getKind() != clang::TemplateArgument::Type) return false;
  const clang::CXXRecordDecl* sampler = arguments[1].getAsType()->getAsCXXRecordDecl();
  if (!sampler) return false;
  std::string name = sampler->getQualifiedNameAsString();
  return name == "torch::data::samplers::RandomSampler" || name == "torch::data::samplers::SequentialSampler";
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

}  // namespace

Rule makeSetupDataLoaderRule() {
  auto makeDataLoader = callExpr(callee(functionDecl(hasName("::torch::data::make_data_loader"))),
                                 callee(expr(ignoringImplicit(declRefExpr().bind("callee")))), inFabricScope())
                            .bind("call");
  return {"fabric-setup-dataloader", "3",
          "Replace torch::data::make_data_loader<Sampler>(dataset, options) with "
          "fabric.setup_dataloader<Sampler>(dataset, options): a distributed sampler on several "
          "ranks (reshuffled every epoch) and batches that arrive on the device.",
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
              // A sampler object the user built: its sharding is theirs to decide.
              makeRule(makeDataLoader, noopEdit(node("call")),
                       cat("data loader with an explicit sampler object: not migrated; give each "
                           "rank its own shard (e.g. torch::data::samplers::DistributedRandomSampler "
                           "with fabric.world_size() and fabric.global_rank())")),
          })};
}

}  // namespace fabricize
