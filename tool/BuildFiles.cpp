#include "BuildFiles.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cctype>
#include <set>

namespace fabricize {

namespace {

// One command invocation of a CMake file: `name(arguments)`.
struct Command {
  std::string name;  // lower case: CMake command names ignore case
  size_t begin = 0, open = 0, close = 0;  // offsets of the name, '(' and ')'
  std::vector<std::pair<size_t, size_t>> arguments;  // [begin, end) of each unquoted or quoted argument
};

// The commands of a CMake file, skipping comments and the insides of quoted
// and bracket arguments. Nested parentheses belong to their command.
std::vector<Command> commandsOf(const std::string& text) {
  std::vector<Command> commands;
  size_t i = 0, n = text.size();
  auto skipComment = [&]() {
    while (i < n && text[i] != '\n') ++i;
  };
  while (i < n) {
    char c = text[i];
    if (c == '#') {
      skipComment();
      continue;
    }
    if (!(std::isalpha(static_cast<unsigned char>(c)) || c == '_')) {
      ++i;
      continue;
    }
    Command command;
    command.begin = i;
    while (i < n && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
    command.name = llvm::StringRef(text).slice(command.begin, i).lower();
    size_t j = i;
    while (j < n && (text[j] == ' ' || text[j] == '\t')) ++j;
    if (j >= n || text[j] != '(') continue;  // a word inside something else
    command.open = j;
    i = j + 1;
    int depth = 1;
    size_t argumentStart = std::string::npos;
    auto endArgument = [&](size_t end) {
      if (argumentStart != std::string::npos) command.arguments.emplace_back(argumentStart, end);
      argumentStart = std::string::npos;
    };
    while (i < n && depth > 0) {
      char d = text[i];
      if (d == '"') {
        if (argumentStart == std::string::npos) argumentStart = i;
        for (++i; i < n && text[i] != '"'; ++i)
          if (text[i] == '\\') ++i;
        ++i;
        continue;
      }
      if (d == '#') {
        endArgument(i);
        skipComment();
        continue;
      }
      if (d == '(') {
        ++depth;
      } else if (d == ')') {
        if (--depth == 0) {
          endArgument(i);
          command.close = i;
          break;
        }
      } else if (std::isspace(static_cast<unsigned char>(d))) {
        endArgument(i);
      } else if (argumentStart == std::string::npos) {
        argumentStart = i;
      }
      ++i;
    }
    if (depth == 0) commands.push_back(std::move(command));
    ++i;
  }
  return commands;
}

unsigned lineAt(const std::string& text, size_t offset) {
  unsigned line = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) line += text[i] == '\n';
  return line;
}

TextEdit insertion(const std::string& text, size_t offset, std::string replacement, std::string why) {
  TextEdit edit;
  edit.offset = static_cast<unsigned>(offset);
  edit.length = 0;
  edit.replacement = std::move(replacement);
  edit.ruleId = kCMakeRuleId;
  edit.explanation = std::move(why);
  lineAndColumn(text, edit.offset, edit.line, edit.column);
  return edit;
}

bool linksLibTorch(llvm::StringRef argument) {
  return argument == "${TORCH_LIBRARIES}" || argument == "torch" || argument == "Torch::torch" ||
         argument == "\"${TORCH_LIBRARIES}\"";
}

}  // namespace

BuildFileMigration migrateCMakeLists(const std::string& text) {
  BuildFileMigration out;
  std::vector<Command> commands = commandsOf(text);
  auto argumentOf = [&](const Command& c, size_t index) {
    auto [b, e] = c.arguments[index];
    return llvm::StringRef(text).slice(b, e);
  };
  const Command* findTorch = nullptr;
  for (const Command& c : commands) {
    if (c.name != "find_package" || c.arguments.empty()) continue;
    if (argumentOf(c, 0) == "Fabric") return out;  // migrated already
    if (argumentOf(c, 0) == "Torch" && !findTorch) findTorch = &c;
  }
  if (!findTorch) {
    out.notes.push_back({1, "this CMakeLists.txt does not find_package(Torch): add "
                            "find_package(Fabric CONFIG REQUIRED) and link Fabric::fabric to the "
                            "training target by hand"});
    return out;
  }
  // The next line after find_package(Torch ...), indented like it.
  size_t lineStart = text.rfind('\n', findTorch->begin);
  lineStart = lineStart == std::string::npos ? 0 : lineStart + 1;
  std::string indent = text.substr(lineStart, findTorch->begin - lineStart);
  size_t lineEnd = text.find('\n', findTorch->close);
  std::string line = indent + "find_package(Fabric CONFIG REQUIRED)";
  if (lineEnd == std::string::npos)
    out.edits.push_back(insertion(text, text.size(), "\n" + line + "\n",
                                  "the Fabric runtime's CMake package (it brings LibTorch and c10d)"));
  else
    out.edits.push_back(insertion(text, lineEnd + 1, line + "\n",
                                  "the Fabric runtime's CMake package (it brings LibTorch and c10d)"));

  bool linked = false;
  for (const Command& c : commands) {
    if (c.name != "target_link_libraries") continue;
    for (size_t a = 1; a < c.arguments.size(); ++a) {
      if (!linksLibTorch(argumentOf(c, a))) continue;
      out.edits.push_back(insertion(text, c.arguments[a].second, " Fabric::fabric",
                                    "link the Fabric runtime wherever LibTorch is linked"));
      linked = true;
      break;
    }
  }
  if (!linked)
    out.notes.push_back({lineAt(text, findTorch->begin),
                         "no target_link_libraries here links ${TORCH_LIBRARIES}: link "
                         "Fabric::fabric to the training target by hand"});
  return out;
}

std::vector<std::string> cmakeListsFor(const std::vector<std::string>& sources, const std::string& root) {
  std::set<std::string> found;
  for (const std::string& source : sources) {
    std::string dir = llvm::sys::path::parent_path(source).str();
    while (true) {
      llvm::SmallString<256> lists(dir), cache(dir);
      llvm::sys::path::append(lists, "CMakeLists.txt");
      llvm::sys::path::append(cache, "CMakeCache.txt");
      if (llvm::sys::fs::is_regular_file(lists) && !llvm::sys::fs::exists(cache))
        found.insert(std::string(lists));
      if (dir == root || dir.size() <= root.size()) break;
      dir = llvm::sys::path::parent_path(dir).str();
    }
  }
  return {found.begin(), found.end()};
}

}  // namespace fabricize
