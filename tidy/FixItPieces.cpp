#include "FixItPieces.h"

#include <cctype>

namespace fabricize::tidy {

namespace {

bool identifierChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || static_cast<unsigned char>(c) >= 0x80;
}
// Whether clang's fix-it merging (EditedSource::adjustRemoval, run on
// every diagnostic's fix-its) leaves the removal of [begin, end) as it is:
// it takes a blank that follows the removal too, and puts a space between
// two identifier characters the removal would join.
bool removalLeftAlone(const std::string& text, unsigned begin, unsigned end) {
  if (end >= text.size()) return true;
  if (text[end] == ' ') return false;
  return begin == 0 || !(identifierChar(text[begin - 1]) && identifierChar(text[end]));
}
// Makes a removal that clang would adjust come out as `fabricize` writes
// it: the same removal one character earlier where that removes the same
// text (a whole line: the newline before it instead of the one after), else
// a replacement that keeps the next (or previous) character.
void keepRemovalExact(const std::string& text, std::vector<FixItPiece>& pieces, size_t i) {
  FixItPiece& piece = pieces[i];
  if (!piece.text.empty() || piece.length == 0) return;
  unsigned begin = piece.offset, end = piece.offset + piece.length;
  if (removalLeftAlone(text, begin, end)) return;
  // Room before and after: no other fix-it may touch the characters used.
  unsigned previousEnd = i > 0 ? pieces[i - 1].offset + pieces[i - 1].length : 0;
  bool previousTouches =
      i > 0 && (previousEnd > begin - 1 || (previousEnd == begin - 1 && pieces[i - 1].owner == piece.owner));
  bool roomBefore = begin > 0 && !previousTouches;
  bool roomAfter = i + 1 == pieces.size() || pieces[i + 1].offset > end;
  if (roomBefore && text[begin - 1] == text[end - 1] && removalLeftAlone(text, begin - 1, end - 1)) {
    --piece.offset;
    return;
  }
  if (roomAfter && end < text.size()) {
    ++piece.length;
    piece.text = text.substr(end, 1);
    return;
  }
  if (roomBefore) {
    --piece.offset;
    ++piece.length;
    piece.text = text.substr(begin - 1, 1);
  }
}

}  // namespace

std::vector<FixItPiece> fixItPieces(const std::string& original, const std::vector<TextEdit>& edits,
                                    const std::function<size_t(const TextEdit&)>& ownerOf) {
  // Insertions at one offset become one piece: clang-tidy would order
  // them by diagnostic, not by catalogue position, and refuses two
  // insertions at one place within a diagnostic.
  std::vector<FixItPiece> pieces;
  for (size_t i = 0; i < edits.size();) {
    const TextEdit& edit = edits[i];
    FixItPiece piece{ownerOf(edit), edit.offset, edit.length, edit.replacement, {}};
    size_t next = i + 1;
    if (edit.length == 0)
      for (; next < edits.size() && edits[next].length == 0 && edits[next].offset == edit.offset; ++next) {
        piece.text += edits[next].replacement;
        size_t other = ownerOf(edits[next]);
        if (other != piece.owner && other != kNoOwner) piece.absorbed.push_back(other);
      }
    i = next;
    if (piece.owner == kNoOwner) continue;
    // Edits of one diagnostic that touch are one edit to clang.
    if (!pieces.empty() && pieces.back().owner == piece.owner &&
        pieces.back().offset + pieces.back().length == piece.offset) {
      pieces.back().length += piece.length;
      pieces.back().text += piece.text;
      for (size_t other : piece.absorbed) pieces.back().absorbed.push_back(other);
      continue;
    }
    pieces.push_back(std::move(piece));
  }
  for (size_t i = 0; i < pieces.size(); ++i) keepRemovalExact(original, pieces, i);
  return pieces;
}

}  // namespace fabricize::tidy
