// Text pieces the rules share: indentation taken from the code being edited,
// so inserted statements look as if the user had written them.
#pragma once

#include "clang/Tooling/Transformer/RangeSelector.h"
#include "clang/Tooling/Transformer/RewriteRule.h"
#include "clang/Tooling/Transformer/Stencil.h"

#include "Rule.h"
#include "rule-helpers/Threading.h"

#include <optional>

#include <string>

namespace fabricize::edits {

// The leading whitespace of the line on which `selector`'s range begins.
clang::transformer::Stencil indentOf(clang::transformer::RangeSelector selector);
// The same for a location: the whitespace before the first character of its
// line (spaces of the same width when code precedes `at` on the line).
std::string indentationAt(clang::SourceLocation at, const clang::SourceManager& sm);

// Where the Fabric (and its launch) go in the body bound to `id`: the start
// of the first statement's line (above the comments that lead it), or the
// statement itself when it shares a line with the brace. In main, the
// leading statements that parse argc/argv without touching LibTorch come
// first.
clang::transformer::RangeSelector fabricInsertionPoint(std::string id);
// `statement` laid out for that place: its own line, indented like the block.
clang::transformer::Stencil fabricInsertionStatement(std::string id, std::string statement);

// The name under which the Fabric is reachable where the rule matched: a
// local fabric::Fabric, a parameter, a data member of the enclosing class,
// else `fabric` (the one fabric-insert puts at the top of main).
// When the function there has no Fabric yet, the need is recorded
// (Threading.h): the edit applies only if the function gets one.
std::string fabricNameAt(const clang::ast_matchers::MatchFinder::MatchResult& result);
// The same, for an edit that is worth making only where the function has
// or gets a Fabric for other reasons: its need does not ask for one, and
// the edit is dropped without a finding where none comes.
std::string fabricNameWhereMigrated(const clang::ast_matchers::MatchFinder::MatchResult& result);
// The Fabric a match's code would need, if its function has none yet: every
// edit there assumes a migrated function (fabric.setup moved the model),
// even one that does not name the Fabric.
std::optional<threading::Need> fabricNeededAt(const clang::ast_matchers::MatchFinder::MatchResult& result);
// Adds that need to a match with edits (not a threading edit of its own),
// as one that only assumes the function is migrated: the engine and the
// clang-tidy plugin call it for every match.
void addScopeNeed(const clang::ast_matchers::MatchFinder::MatchResult& result, bool hasEdits,
                  threading::MatchNeeds& needs);
// The member fabric-thread-fabric adds to a class: `fabric_` when the
// class's fields end in '_', else `fabric`.
std::string threadedMemberName(const clang::CXXRecordDecl& record);

// `<fabric name>.<member>`, e.g. fabricMember("backward(") -> "trainer_fabric.backward(".
clang::transformer::Stencil fabricMember(std::string member);

// `edit` declares the Fabric in the main bound to "main", and is applied
// only if a function main calls needs it (a delegatingMain()).
clang::transformer::ASTEdit declaringFabricInMain(clang::transformer::ASTEdit edit);

// `edit`, marked as one that may be left out without a finding when its
// function gets no Fabric (a print in a helper that uses no LibTorch).
clang::transformer::ASTEdit optionalEdit(clang::transformer::ASTEdit edit);

// `edit`, marked as one that needs no Fabric: it is applied wherever it
// lands, also in a function that gets none (a data_parallel call in a
// helper becomes a plain forward whether or not the helper is migrated).
clang::transformer::ASTEdit standaloneEdit(clang::transformer::ASTEdit edit);

// Inserts `statement` (one C++ statement, with its `;`) before `before`, a
// statement of a block: on a line of its own, indented like it; or in front
// of it, on its line, when `before` shares its line with what precedes it
// (`for (...) { x; }`).
clang::transformer::Edit statementBefore(const clang::Stmt& before, const std::string& statement,
                                         const clang::SourceManager& sm);

// `at`, moved before the block comments that lead it on its line
// (`f(/*loss=*/x)`: before `/*loss=*/`), so an argument inserted there does
// not take the next one's label.
clang::SourceLocation beforeLeadingComments(clang::SourceLocation at, const clang::SourceManager& sm);

// Removes a whole statement; the engine also removes its line when nothing
// else is on it.
clang::transformer::ASTEdit removeStatement(std::string id);

// The fabric::Options expression fabricize emits for the given choices.
std::string optionsExpression(const FabricOptions& options);

// `fabric::Fabric fabric(<options>);`
std::string fabricDeclaration(const FabricOptions& options);

}  // namespace fabricize::edits
