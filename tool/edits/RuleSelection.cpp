#include "edits/RuleSelection.h"

#include "edits/EditSet.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <sstream>

namespace fabricize {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// A NOLINT list names rules exactly or by a trailing-`*` glob.
bool listNames(const std::string& list, const std::string& ruleId) {
  for (const std::string& name : splitList(list)) {
    if (name == ruleId || name == "*") return true;
    if (name.back() == '*' && ruleId.compare(0, name.size() - 1, name, 0, name.size() - 1) == 0) return true;
  }
  return false;
}

// Looks for `marker` (e.g. "NOLINTNEXTLINE") in `line` not followed by more
// letters; true when it is bare or its parenthesised list names the rule.
bool markerCovers(const std::string& line, const std::string& marker, const std::string& ruleId) {
  for (size_t at = line.find(marker); at != std::string::npos; at = line.find(marker, at + 1)) {
    size_t after = at + marker.size();
    if (after < line.size() && std::isupper(static_cast<unsigned char>(line[after]))) continue;
    if (after >= line.size() || line[after] != '(') return true;
    size_t close = line.find(')', after);
    if (close == std::string::npos) continue;
    if (listNames(line.substr(after + 1, close - after - 1), ruleId)) return true;
  }
  return false;
}

// "select": ["a", "b"] or "select": "a, b".
std::vector<std::string> listValue(const std::string& key, const nlohmann::json& value) {
  if (value.is_string()) return splitList(value.get<std::string>());
  if (!value.is_array())
    throw std::runtime_error("'" + key + "' must be a list of rule ids or a comma-separated string, not " +
                             std::string(value.type_name()));
  std::vector<std::string> items;
  for (const auto& item : value) {
    if (!item.is_string())
      throw std::runtime_error("'" + key + "' lists rule ids as strings; found " + std::string(item.type_name()) + " " +
                               item.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    std::string id = trim(item.get<std::string>());
    if (id.empty()) throw std::runtime_error("'" + key + "' lists an empty rule id");
    items.push_back(id);
  }
  return items;
}

}  // namespace

bool matchesPattern(const std::string& ruleId, const std::string& pattern) {
  if (pattern.empty()) return false;
  if (pattern == "*") return true;
  std::string prefix = pattern.back() == '*' ? pattern.substr(0, pattern.size() - 1) : pattern;
  return ruleId.compare(0, prefix.size(), prefix) == 0;
}

bool RuleSelection::admits(const std::string& ruleId) const {
  auto matches = [&](const std::string& p) { return matchesPattern(ruleId, p); };
  bool selected = select.empty() || std::any_of(select.begin(), select.end(), matches);
  return selected && std::none_of(ignore.begin(), ignore.end(), matches);
}

std::vector<std::string> splitList(const std::string& list) {
  std::vector<std::string> items;
  std::stringstream stream(list);
  std::string item;
  while (std::getline(stream, item, ','))
    if (!trim(item).empty()) items.push_back(trim(item));
  return items;
}

std::string unknownPatternError(const std::vector<std::string>& patterns, const std::vector<std::string>& knownIds,
                                const std::string& option) {
  for (const std::string& pattern : patterns) {
    if (std::any_of(knownIds.begin(), knownIds.end(),
                    [&](const std::string& id) { return matchesPattern(id, pattern); }))
      continue;
    std::string nearest;
    size_t best = std::string::npos;
    for (const std::string& id : knownIds) {
      size_t distance = editDistance(pattern, id);
      if (distance < best) best = distance, nearest = id;
    }
    std::string message = option + ": '" + pattern + "' names no rule";
    if (!nearest.empty() && best <= std::max<size_t>(3, pattern.size() / 3))
      message += " (did you mean '" + nearest + "'?)";
    return message + "; `fabricize --list-rules` lists the ids";
  }
  return "";
}

bool parseRuleSelection(const std::string& text, const std::string& origin, const std::vector<std::string>& knownIds,
                        RuleSelection& out, std::string& error) {
  out = RuleSelection{};
  try {
    nlohmann::json json = nlohmann::json::parse(text);
    if (!json.is_object()) throw std::runtime_error("must be a JSON object with \"select\" and/or \"ignore\"");
    RuleSelection parsed;
    for (auto& [key, value] : json.items()) {
      if (key == "select")
        parsed.select = listValue(key, value);
      else if (key == "ignore")
        parsed.ignore = listValue(key, value);
      else
        throw std::runtime_error("unknown key '" + key + "' (known: select, ignore)");
    }
    for (const char* key : {"select", "ignore"}) {
      std::string problem =
          unknownPatternError(std::string(key) == "select" ? parsed.select : parsed.ignore, knownIds, key);
      if (!problem.empty()) throw std::runtime_error(problem);
    }
    out = std::move(parsed);
    return true;
  } catch (const nlohmann::json::parse_error& e) {
    // The parser counts bytes; a person looks for a line.
    unsigned line = 1, column = 1;
    if (e.byte > 0) lineAndColumn(text, static_cast<unsigned>(std::min(e.byte - 1, text.size())), line, column);
    error = origin + ":" + std::to_string(line) + ":" + std::to_string(column) + ": not valid JSON (" + e.what() + ")";
    return false;
  } catch (const std::exception& e) {
    error = origin + ": " + e.what();
    return false;
  }
}

bool isSuppressed(const std::string& text, unsigned line, const std::string& ruleId) {
  if (markerCovers(lineText(text, line), "NOLINT", ruleId)) return true;
  if (line > 1 && markerCovers(lineText(text, line - 1), "NOLINTNEXTLINE", ruleId)) return true;
  // NOLINTBEGIN/END regions: a begin that covers the rule and has no end yet.
  if (text.find("NOLINTBEGIN") == std::string::npos) return false;
  int open = 0;
  for (unsigned l = 1; l < line; ++l) {
    std::string t = lineText(text, l);
    if (markerCovers(t, "NOLINTBEGIN", ruleId)) ++open;
    if (markerCovers(t, "NOLINTEND", ruleId) && open > 0) --open;
  }
  return open > 0;
}

}  // namespace fabricize
