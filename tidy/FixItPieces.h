// The clang-tidy plugin's fix-its, shaped so that clang applies them as
// `fabricize` writes its edits: insertions at one place as one fix-it (in
// catalogue order), touching edits of one diagnostic as one, and removals
// that clang's fix-it merging would widen (a blank after, a space between
// joined identifiers) moved or extended so they are not.
#pragma once

#include "edits/EditSet.h"

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace fabricize::tidy {

inline constexpr size_t kNoOwner = static_cast<size_t>(-1);

// One fix-it of one diagnostic.
struct FixItPiece {
  size_t owner;  // the match (diagnostic) that carries it
  unsigned offset, length;
  std::string text;
  std::vector<size_t> absorbed;  // other matches whose insertion this carries
};

// The fix-its of one file's merged, sorted edits of `original`; `ownerOf`
// says which match an edit belongs to (kNoOwner: none, the edit is left out).
std::vector<FixItPiece> fixItPieces(const std::string& original, const std::vector<TextEdit>& edits,
                                    const std::function<size_t(const TextEdit&)>& ownerOf);

}  // namespace fabricize::tidy
