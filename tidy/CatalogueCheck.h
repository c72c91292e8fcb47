// One clang-tidy check per rule of the fabricize catalogue. Every check is
// the same class, told at construction which rule id it runs; the rule itself
// comes from buildCatalogue(), so the plugin holds no copy of any rule.
//
// Why not clang-tidy's TransformerClangTidyCheck: its check() is final and
// turns each match's edits straight into fix-its. `fabricize` does more
// between the rules and the text (tool/edits/EditSet.cpp): removed statements take
// their line with them, identical edits from two rules count once, an edit
// inside a statement another rule replaces is dropped, and <fabric/fabric.h>
// goes after the <torch/...> include. Fix-its built from raw edits would make
// `clang-tidy --fix` disagree with `fabricize`, and clang-tidy discards *both*
// fixes when two diagnostics' edits overlap. So the checks of one translation
// unit share a Session that merges all their edits the way migrate does, and
// each check then reports its own matches with the merged edits it owns.
#pragma once

#include "edits/EditSet.h"
#include "Rule.h"

#include "clang-tidy/ClangTidyCheck.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fabricize::tidy {

class Session;

// The five FabricOptions as check options, e.g. fabric-insert.Strategy; a
// global option of the same name (Strategy) applies to every fabric check.
inline constexpr const char* kOptionNames[] = {"Accelerator", "Devices", "Strategy", "Precision", "NumNodes"};

class CatalogueCheck : public clang::tidy::ClangTidyCheck {
 public:
  CatalogueCheck(llvm::StringRef name, clang::tidy::ClangTidyContext* context);
  ~CatalogueCheck() override;

  bool isLanguageVersionSupported(const clang::LangOptions& lang) const override { return lang.CPlusPlus; }
  void storeOptions(clang::tidy::ClangTidyOptions::OptionMap& options) override;
  void registerMatchers(clang::ast_matchers::MatchFinder* finder) override;
  void check(const clang::ast_matchers::MatchFinder::MatchResult& result) override;
  void onStartOfTranslationUnit() override;
  void onEndOfTranslationUnit() override;

 private:
  FabricOptions options_;
  std::optional<Rule> rule_;  // empty when the options are invalid: nothing runs
  size_t ruleIndex_ = 0;      // catalogue position: orders insertions at one place
  std::shared_ptr<Session> session_;
  std::vector<size_t> recorded_;  // this check's matches in the session
};

}  // namespace fabricize::tidy
