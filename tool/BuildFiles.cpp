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

std::vector<BuildFileMigration> migrateCMakeProject(const std::vector<std::string>& texts) {
  std::vector<BuildFileMigration> out(texts.size());
  std::vector<std::vector<Command>> parsed;
  for (const std::string& text : texts) parsed.push_back(commandsOf(text));
  auto argumentOf = [&](size_t f, const Command& c, size_t index) {
    auto [b, e] = c.arguments[index];
    return llvm::StringRef(texts[f]).slice(b, e);
  };
  // find_package(Fabric) after every find_package(Torch) whose file does not
  // find Fabric already: imported targets are scoped to the directory that
  // finds them, so Fabric::fabric must be found wherever Torch is.
  const Command* firstTorch = nullptr;
  size_t firstTorchFile = 0;
  bool linked = false;
  for (size_t f = 0; f < texts.size(); ++f) {
    const std::string& text = texts[f];
    bool findsFabric = false;
    for (const Command& c : parsed[f])
      if (c.name == "find_package" && !c.arguments.empty() && argumentOf(f, c, 0) == "Fabric") findsFabric = true;
    for (const Command& c : parsed[f]) {
      if (c.name != "find_package" || c.arguments.empty() || argumentOf(f, c, 0) != "Torch") continue;
      if (!firstTorch) {
        firstTorch = &c;
        firstTorchFile = f;
      }
      if (findsFabric) continue;
      findsFabric = true;  // once per file
      // The next line after find_package(Torch ...), indented like it.
      size_t lineStart = text.rfind('\n', c.begin);
      lineStart = lineStart == std::string::npos ? 0 : lineStart + 1;
      std::string indent = text.substr(lineStart, c.begin - lineStart);
      size_t lineEnd = text.find('\n', c.close);
      std::string line = indent + "find_package(Fabric CONFIG REQUIRED)";
      const char* why = "the Fabric runtime's CMake package (it brings LibTorch and c10d)";
      if (lineEnd == std::string::npos)
        out[f].edits.push_back(insertion(text, text.size(), "\n" + line + "\n", why));
      else
        out[f].edits.push_back(insertion(text, lineEnd + 1, line + "\n", why));
    }
    // Fabric::fabric next to LibTorch in every target_link_libraries, with
    // LibTorch's visibility, so what links a library that links LibTorch
    // PUBLIC gets the runtime the same way.
    for (const Command& c : parsed[f]) {
      if (c.name != "target_link_libraries") continue;
      bool hasFabric = false;
      for (size_t a = 1; a < c.arguments.size(); ++a) hasFabric = hasFabric || argumentOf(f, c, a) == "Fabric::fabric";
      for (size_t a = 1; a < c.arguments.size(); ++a) {
        if (!linksLibTorch(argumentOf(f, c, a))) continue;
        linked = true;
        if (hasFabric) break;
        out[f].edits.push_back(insertion(text, c.arguments[a].second, " Fabric::fabric",
                                         "link the Fabric runtime wherever LibTorch is linked"));
        break;
      }
    }
  }
  if (!firstTorch) {
    if (texts.empty()) return out;
    out[0].notes.push_back({1, "no CMake file of this project does find_package(Torch): add "
                                 "find_package(Fabric CONFIG REQUIRED) and link Fabric::fabric to the "
                                 "training target by hand"});
    return out;
  }
  if (!linked)
    out[firstTorchFile].notes.push_back(
        {lineAt(texts[firstTorchFile], firstTorch->begin),
         "no target_link_libraries of this project links ${TORCH_LIBRARIES}: link Fabric::fabric to the "
         "training target by hand"});
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
