// Edits as data: what the rules produced for one file, merged the way
// clang-apply-replacements would (duplicates once, edits inside a removed
// region dropped, partial overlaps reported as conflicts), then applied.
#pragma once

#include <string>
#include <vector>

namespace fabricize {

struct TextEdit {
  unsigned offset = 0;
  unsigned length = 0;
  std::string replacement;
  size_t ruleIndex = 0;  // catalogue position: orders insertions at one offset
  std::string ruleId;
  std::string explanation;
  unsigned line = 0, column = 0;  // 1-based, of the original text
};

struct EditConflict {
  TextEdit kept, dropped;
};

struct MergedEdits {
  std::vector<TextEdit> edits;  // sorted, non-overlapping
  std::vector<EditConflict> conflicts;
};

// A removal that leaves only whitespace on its line takes the whole line
// with it, so removed statements leave no blank line behind.
TextEdit widenRemovalToLine(const std::string& text, TextEdit edit);

MergedEdits mergeEdits(const std::string& text, std::vector<TextEdit> edits);

std::string applyEdits(const std::string& text, const std::vector<TextEdit>& sortedEdits);

// Where `#include <header>` goes: after the line including <torch/torch.h>
// (or the last <torch/...> include), else before the first #include, else at
// the top. Returns no edit when the header is already included.
bool includeInsertion(const std::string& text, const std::string& header, TextEdit& out);

// Replacement text uses '\n'; a file written with CRLF line endings gets
// CRLF in the inserted text too.
void matchLineEndings(const std::string& text, std::vector<TextEdit>& edits);

// Whether inserted text uses the runtime (`fabric.backward(`, `fabric_.`,
// `fabric::Options`): only then does a file need <fabric/fabric.h>.
bool refersToRuntime(const std::string& replacement);

// The migrate result for `original` from the given edits, the way
// `fabricize --stdout` renders it: merged, with the Fabric include added
// when a rule asked for it, or when an edit uses the runtime and no project
// header the file includes brings it (`includedThroughHeader`), line
// endings matched. Conflicts and the merged edits that were applied are
// returned on request.
std::string renderFixed(const std::string& original, const std::vector<TextEdit>& edits, bool wantsInclude,
                        std::vector<EditConflict>* conflicts = nullptr, std::vector<TextEdit>* applied = nullptr,
                        bool includedThroughHeader = false);

// 1-based line and column of `offset` in `text`.
void lineAndColumn(const std::string& text, unsigned offset, unsigned& line, unsigned& column);

// Line `line` (1-based) of `text` without its line ending; empty past the end.
std::string lineText(const std::string& text, unsigned line);

// 0-based UTF-16 offset within its line of the byte `column` (1-based) of
// `line` (1-based): LSP positions and SARIF columns count UTF-16 code units.
unsigned utf16Column(const std::string& text, unsigned line, unsigned column);

}  // namespace fabricize
