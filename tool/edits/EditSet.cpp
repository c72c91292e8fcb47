#include "edits/EditSet.h"

#include "utilities/StableOrder.h"

#include <algorithm>
#include <regex>
#include <sstream>

namespace fabricize {

void lineAndColumn(const std::string& text, unsigned offset, unsigned& line, unsigned& column) {
  line = 1;
  column = 1;
  for (unsigned i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
}

std::string lineText(const std::string& text, unsigned line) {
  size_t begin = 0;
  for (unsigned l = 1; l < line; ++l) {
    begin = text.find('\n', begin);
    if (begin == std::string::npos) return "";
    ++begin;
  }
  size_t end = text.find('\n', begin);
  std::string result = text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  if (!result.empty() && result.back() == '\r') result.pop_back();
  return result;
}

unsigned utf16Column(const std::string& text, unsigned line, unsigned column) {
  std::string lineBytes = lineText(text, line);
  unsigned units = 0;
  for (unsigned i = 0; i + 1 < column && i < lineBytes.size(); ++i) {
    unsigned char c = lineBytes[i];
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    units += (c >= 0xF0) ? 2 : 1;      // 4-byte sequences are surrogate pairs
  }
  return units;
}

void matchLineEndings(const std::string& text, std::vector<TextEdit>& edits) {
  size_t firstNewline = text.find('\n');
  if (firstNewline == std::string::npos || firstNewline == 0 || text[firstNewline - 1] != '\r') return;
  for (TextEdit& e : edits) {
    std::string converted;
    for (size_t i = 0; i < e.replacement.size(); ++i) {
      if (e.replacement[i] == '\n' && (i == 0 || e.replacement[i - 1] != '\r')) converted += '\r';
      converted += e.replacement[i];
    }
    e.replacement = std::move(converted);
  }
}

TextEdit widenRemovalToLine(const std::string& text, TextEdit edit) {
  if (!edit.replacement.empty() || edit.length == 0) return edit;
  size_t begin = edit.offset, end = edit.offset + edit.length;
  size_t lineStart = begin;
  while (lineStart > 0 && (text[lineStart - 1] == ' ' || text[lineStart - 1] == '\t')) --lineStart;
  if (lineStart > 0 && text[lineStart - 1] != '\n') return edit;
  // Transformer's statement ranges may already end past the newline.
  if (end > 0 && text[end - 1] == '\n') {
    edit.offset = static_cast<unsigned>(lineStart);
    edit.length = static_cast<unsigned>(end - lineStart);
    return edit;
  }
  size_t lineEnd = end;
  while (lineEnd < text.size() && (text[lineEnd] == ' ' || text[lineEnd] == '\t' || text[lineEnd] == '\r')) ++lineEnd;
  if (lineEnd < text.size() && text[lineEnd] != '\n') return edit;
  if (lineEnd < text.size()) ++lineEnd;  // the newline itself
  edit.offset = static_cast<unsigned>(lineStart);
  edit.length = static_cast<unsigned>(lineEnd - lineStart);
  return edit;
}

namespace {

bool sameEdit(const TextEdit& a, const TextEdit& b) {
  return a.offset == b.offset && a.length == b.length && a.replacement == b.replacement;
}
unsigned endOf(const TextEdit& e) { return e.offset + e.length; }
// `inner` lies within the text `outer` replaces: applying `outer` subsumes it.
bool strictlyInside(const TextEdit& inner, const TextEdit& outer) {
  if (outer.length == 0) return false;
  if (inner.length == 0) return inner.offset > outer.offset && inner.offset < endOf(outer);
  return inner.offset >= outer.offset && endOf(inner) <= endOf(outer) && !sameEdit(inner, outer);
}
bool overlap(const TextEdit& a, const TextEdit& b) {
  if (a.length == 0 || b.length == 0) return false;
  return a.offset < endOf(b) && b.offset < endOf(a);
}

}  // namespace

MergedEdits mergeEdits(const std::string& text, std::vector<TextEdit> edits) {
  for (auto& e : edits) e = widenRemovalToLine(text, e);
  // Larger edits first, so containment is decided against the outermost.
  stableSort(edits, [](const TextEdit& a, const TextEdit& b) {
    if (a.length != b.length) return a.length > b.length;
    return a.ruleIndex < b.ruleIndex;
  });
  MergedEdits merged;
  for (const TextEdit& candidate : edits) {
    bool keep = true;
    for (const TextEdit& kept : merged.edits) {
      if (sameEdit(candidate, kept) || strictlyInside(candidate, kept)) {
        keep = false;
        break;
      }
      if (overlap(candidate, kept)) {
        merged.conflicts.push_back({kept, candidate});
        keep = false;
        break;
      }
    }
    if (keep) merged.edits.push_back(candidate);
  }
  // Text order; at one offset, insertions first (by rule order), then the
  // replacement that starts there.
  stableSort(merged.edits, [](const TextEdit& a, const TextEdit& b) {
    if (a.offset != b.offset) return a.offset < b.offset;
    if ((a.length == 0) != (b.length == 0)) return a.length == 0;
    return a.ruleIndex < b.ruleIndex;
  });
  return merged;
}

std::string applyEdits(const std::string& text, const std::vector<TextEdit>& sortedEdits) {
  std::string out;
  out.reserve(text.size() + 256);
  size_t cursor = 0;
  for (const TextEdit& e : sortedEdits) {
    out.append(text, cursor, e.offset - cursor);
    out += e.replacement;
    cursor = e.offset + e.length;
  }
  out.append(text, cursor, std::string::npos);
  return out;
}

bool includeInsertion(const std::string& text, const std::string& header, TextEdit& out) {
  std::istringstream lines(text);
  std::string line;
  size_t offset = 0, afterTorch = std::string::npos, firstInclude = std::string::npos;
  // A UTF-8 byte order mark stays the file's first bytes: nothing goes before it.
  const size_t bom = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  while (std::getline(lines, line)) {
    size_t next = offset + line.size() + 1;
    if (offset == 0 && bom) line.erase(0, bom);
    std::string trimmed =
        line.substr(line.find_first_not_of(" \t") == std::string::npos ? line.size() : line.find_first_not_of(" \t"));
    if (trimmed.rfind("#include", 0) == 0) {
      if (trimmed.find("<" + header + ">") != std::string::npos ||
          trimmed.find("\"" + header + "\"") != std::string::npos)
        return false;
      if (firstInclude == std::string::npos) firstInclude = offset == 0 ? bom : offset;
      if (trimmed.find("<torch/") != std::string::npos) afterTorch = std::min(next, text.size());
    }
    offset = next;
  }
  out = TextEdit();
  out.replacement = "#include <" + header + ">\n";
  if (afterTorch != std::string::npos) {
    // A file whose last line has no newline still gets a well-formed line.
    if (afterTorch == text.size() && !text.empty() && text.back() != '\n')
      out.replacement = "\n#include <" + header + ">";
    out.offset = static_cast<unsigned>(afterTorch);
  } else if (firstInclude != std::string::npos) {
    out.offset = static_cast<unsigned>(firstInclude);
  } else {
    out.offset = static_cast<unsigned>(bom);
  }
  return true;
}

bool refersToRuntime(const std::string& replacement) {
  // `fabric.x`, `fabric_.x`, `trainer_fabric.x`, `fabric::Options`.
  static const std::regex use("fabric_?(\\.|::)");
  return std::regex_search(replacement, use);
}

std::string renderFixed(const std::string& original, const std::vector<TextEdit>& edits, bool wantsInclude,
                        std::vector<EditConflict>* conflicts, std::vector<TextEdit>* applied,
                        bool includedThroughHeader) {
  // Migrate, lint --fix and the LSP all render through here.
  MergedEdits merged = mergeEdits(original, edits);
  // A rule's own request (main's Fabric) always counts; a use of the runtime
  // does unless a project header the file includes brings it already.
  bool usesRuntime = false;
  for (const TextEdit& e : merged.edits) usesRuntime = usesRuntime || refersToRuntime(e.replacement);
  if (wantsInclude || (usesRuntime && !includedThroughHeader)) {
    TextEdit include;
    if (includeInsertion(original, "fabric/fabric.h", include)) {
      include.ruleId = "fabric-insert";
      include.explanation = "include the Fabric runtime";
      lineAndColumn(original, include.offset, include.line, include.column);
      std::vector<TextEdit> all = merged.edits;
      all.push_back(include);
      auto earlier = merged.conflicts;
      merged = mergeEdits(original, all);
      merged.conflicts.insert(merged.conflicts.end(), earlier.begin(), earlier.end());
    }
  }
  if (conflicts) *conflicts = merged.conflicts;
  matchLineEndings(original, merged.edits);
  if (applied) *applied = merged.edits;
  return applyEdits(original, merged.edits);
}

}  // namespace fabricize
