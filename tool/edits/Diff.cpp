#include "edits/Diff.h"

#include <algorithm>

namespace fabricize {

namespace {

constexpr size_t kContext = 3;

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size() - 1;
    lines.push_back(text.substr(start, end - start + 1));
    start = end + 1;
  }
  return lines;
}

// Line-start offsets: lineStarts[i] is where line i begins.
std::vector<size_t> lineStarts(const std::string& text) {
  std::vector<size_t> starts{0};
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n' && i + 1 < text.size()) starts.push_back(i + 1);
  return starts;
}

size_t lineOf(const std::vector<size_t>& starts, size_t offset) {
  return static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), offset) - starts.begin()) - 1;
}

struct Op {
  char kind;  // ' ', '-', '+'
  std::string line;
};

// Longest-common-subsequence diff of two short line lists (one hunk).
std::vector<Op> diffLines(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::vector<unsigned>> lcs(a.size() + 1, std::vector<unsigned>(b.size() + 1, 0));
  for (size_t i = a.size(); i-- > 0;)
    for (size_t j = b.size(); j-- > 0;)
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  std::vector<Op> ops;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (i < a.size() && j < b.size() && a[i] == b[j]) {
      ops.push_back({' ', a[i++]});
      ++j;
    } else if (i < a.size() && (j == b.size() || lcs[i + 1][j] >= lcs[i][j + 1])) {
      ops.push_back({'-', a[i++]});  // removals before additions, as diff(1) prints them
    } else {
      ops.push_back({'+', b[j++]});
    }
  }
  return ops;
}

}  // namespace

std::string unifiedDiff(const std::string& original, const std::vector<TextEdit>& sortedEdits,
                        const std::string& oldName, const std::string& newName) {
  if (sortedEdits.empty()) return {};
  std::vector<size_t> starts = lineStarts(original);
  std::vector<std::string> oldLines = splitLines(original);
  size_t lineCount = oldLines.size();

  // Group edits whose touched lines are close enough to share context.
  struct Region {
    size_t firstLine, lastLine;  // inclusive, in the original
    std::vector<TextEdit> edits;
  };
  std::vector<Region> regions;
  for (const TextEdit& e : sortedEdits) {
    size_t first = lineOf(starts, std::min<size_t>(e.offset, original.empty() ? 0 : original.size() - 1));
    size_t last = e.length == 0 ? first : lineOf(starts, e.offset + e.length - 1);
    if (original.empty()) first = last = 0;
    if (!regions.empty() && first <= regions.back().lastLine + 2 * kContext + 1) {
      regions.back().lastLine = std::max(regions.back().lastLine, last);
      regions.back().edits.push_back(e);
    } else {
      regions.push_back({first, last, {e}});
    }
  }

  std::string out = "--- " + oldName + "\n+++ " + newName + "\n";
  long shift = 0;  // new line number minus old line number so far
  for (const Region& r : regions) {
    size_t first = r.firstLine >= kContext ? r.firstLine - kContext : 0;
    size_t last = lineCount == 0 ? 0 : std::min(lineCount - 1, r.lastLine + kContext);
    size_t begin = lineCount == 0 ? 0 : starts[first];
    size_t end = last + 1 < starts.size() ? starts[last + 1] : original.size();
    std::vector<TextEdit> local = r.edits;
    for (TextEdit& e : local) e.offset -= static_cast<unsigned>(begin);
    std::string oldText = original.substr(begin, end - begin);
    std::string newText = applyEdits(oldText, local);
    std::vector<std::string> a = splitLines(oldText), b = splitLines(newText);
    out += "@@ -" + std::to_string(a.empty() ? first : first + 1) + "," + std::to_string(a.size()) + " +" +
           std::to_string(b.empty() ? first + shift : first + 1 + shift) + "," + std::to_string(b.size()) + " @@\n";
    for (const Op& op : diffLines(a, b)) {
      out += op.kind;
      out += op.line;
      if (op.line.empty() || op.line.back() != '\n') out += "\n\\ No newline at end of file\n";
    }
    shift += static_cast<long>(b.size()) - static_cast<long>(a.size());
  }
  return out;
}

}  // namespace fabricize
