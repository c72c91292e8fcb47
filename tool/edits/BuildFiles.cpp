#include "edits/BuildFiles.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cctype>
#include <set>

namespace fabricize {

namespace {

// One command invocation of a CMake file: `name(arguments)`.
struct Command {
  std::string name;                                  // lower case: CMake command names ignore case
  size_t begin = 0, open = 0, close = 0;             // offsets of the name, '(' and ')'
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

// An argument that names LibTorch: `${TORCH_LIBRARIES}` (also quoted or in a
// generator expression), `${TORCH_LIBRARY}`, the `torch` target.
bool linksLibTorch(llvm::StringRef argument) {
  argument = argument.trim('"');
  return argument.contains("${TORCH_LIBRARIES}") || argument.contains("${TORCH_LIBRARY}") || argument == "torch" ||
         argument == "Torch::torch";
}

bool isVisibilityKeyword(llvm::StringRef argument) {
  return argument == "PUBLIC" || argument == "PRIVATE" || argument == "INTERFACE" || argument == "LINK_PUBLIC" ||
         argument == "LINK_PRIVATE" || argument == "LINK_INTERFACE_LIBRARIES";
}

bool isLinkCommand(const Command& c) { return c.name == "target_link_libraries" || c.name == "link_libraries"; }

// Index of a command's first linked item (target_link_libraries names its
// target first).
size_t firstItem(const Command& c) { return c.name == "target_link_libraries" ? 1 : 0; }

// Variables the project's CMake files set to a list that holds LibTorch
// (`set(LIBRARIES ${TORCH_LIBRARIES} ${OpenCV_LIBS})`, through other
// variables too), so the argument `${LIBRARIES}` is where LibTorch is.
std::set<std::string> variablesHoldingLibTorch(const std::vector<std::string>& texts,
                                               const std::vector<std::vector<Command>>& parsed) {
  std::set<std::string> holding;
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t f = 0; f < texts.size(); ++f)
      for (const Command& c : parsed[f]) {
        if ((c.name != "set" && c.name != "list") || c.arguments.size() < 2) continue;
        size_t nameAt = c.name == "list" ? 1 : 0;
        if (c.name == "list") {
          llvm::StringRef operation = llvm::StringRef(texts[f]).slice(c.arguments[0].first, c.arguments[0].second);
          if (operation != "APPEND" && operation != "PREPEND" && operation != "INSERT") continue;
        }
        if (nameAt >= c.arguments.size()) continue;
        std::string name =
            llvm::StringRef(texts[f]).slice(c.arguments[nameAt].first, c.arguments[nameAt].second).trim('"').str();
        if (holding.count(name)) continue;
        for (size_t a = nameAt + 1; a < c.arguments.size(); ++a) {
          llvm::StringRef value = llvm::StringRef(texts[f]).slice(c.arguments[a].first, c.arguments[a].second);
          bool holds = linksLibTorch(value);
          for (const std::string& known : holding) holds = holds || value.contains("${" + known + "}");
          if (holds) {
            holding.insert(name);
            grew = true;
            break;
          }
        }
      }
  }
  return holding;
}

// The line that finds the runtime, after `find_package(Torch ...)`. A
// project that sets CMAKE_PREFIX_PATH itself (`set(CMAKE_PREFIX_PATH
// "/opt/libtorch")`) hides the one given on the command line, where the
// runtime's package is: the cache's value is searched too.
std::string findFabricLine(bool projectSetsPrefixPath) {
  return projectSetsPrefixPath ? "find_package(Fabric CONFIG REQUIRED HINTS $CACHE{CMAKE_PREFIX_PATH})"
                               : "find_package(Fabric CONFIG REQUIRED)";
}

}  // namespace

std::vector<BuildFileMigration> migrateCMakeProject(const std::vector<std::string>& paths,
                                                    const std::vector<std::string>& texts, const LibTorchLinks* links) {
  std::vector<BuildFileMigration> out(texts.size());
  std::vector<std::vector<Command>> parsed;
  for (const std::string& text : texts) parsed.push_back(commandsOf(text));
  auto argumentOf = [&](size_t f, const Command& c, size_t index) {
    auto [b, e] = c.arguments[index];
    return llvm::StringRef(texts[f]).slice(b, e);
  };
  bool setsPrefixPath = false;
  for (size_t f = 0; f < texts.size(); ++f)
    for (const Command& c : parsed[f])
      if (c.name == "set" && !c.arguments.empty() && argumentOf(f, c, 0) == "CMAKE_PREFIX_PATH") {
        bool cached = false;
        for (size_t a = 1; a < c.arguments.size(); ++a) cached = cached || argumentOf(f, c, a) == "CACHE";
        setsPrefixPath = setsPrefixPath || !cached;
      }
  const std::set<std::string> holding = variablesHoldingLibTorch(texts, parsed);
  auto namesLibTorch = [&](llvm::StringRef argument) {
    if (linksLibTorch(argument)) return true;
    for (const std::string& name : holding)
      if (argument.contains("${" + name + "}")) return true;
    return false;
  };

  // find_package(Fabric) after every find_package(Torch) whose file does not
  // find Fabric already: imported targets are scoped to the directory that
  // finds them, so Fabric::fabric must be found wherever Torch is.
  const Command* firstTorch = nullptr;
  size_t firstTorchFile = 0;
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
      std::string line = indent + findFabricLine(setsPrefixPath);
      const char* why = setsPrefixPath ? "the Fabric runtime's CMake package (it brings LibTorch and c10d), also "
                                         "where the command line's CMAKE_PREFIX_PATH says: the project sets its own"
                                       : "the Fabric runtime's CMake package (it brings LibTorch and c10d)";
      if (lineEnd == std::string::npos)
        out[f].edits.push_back(insertion(text, text.size(), "\n" + line + "\n", why));
      else
        out[f].edits.push_back(insertion(text, lineEnd + 1, line + "\n", why));
    }
  }

  // Fabric::fabric in a link command: next to the argument that names
  // LibTorch, with its visibility, so what links a library that links
  // LibTorch PUBLIC gets the runtime the same way; else at the end.
  auto linkFabric = [&](size_t f, const Command& c, bool propagate) {
    for (size_t a = firstItem(c); a < c.arguments.size(); ++a)
      if (argumentOf(f, c, a) == "Fabric::fabric") return;
    const char* why = "link the Fabric runtime wherever LibTorch is linked";
    for (size_t a = firstItem(c); a < c.arguments.size(); ++a)
      if (namesLibTorch(argumentOf(f, c, a))) {
        out[f].edits.push_back(insertion(texts[f], c.arguments[a].second, " Fabric::fabric", why));
        return;
      }
    // LibTorch arrives some other way (a list CMake evaluated): the runtime
    // goes last; for a library, PUBLIC in a keyword signature (INTERFACE on
    // an interface library, the old keywords with the old signature), so
    // what links the library gets it as it gets LibTorch.
    std::string keyword;
    for (size_t a = firstItem(c); propagate && a < c.arguments.size(); ++a) {
      llvm::StringRef argument = argumentOf(f, c, a);
      if (!isVisibilityKeyword(argument)) continue;
      if (argument.starts_with("LINK_"))
        keyword = "LINK_PUBLIC";
      else if (keyword.empty() || keyword == "INTERFACE")
        keyword = argument == "INTERFACE" ? "INTERFACE" : "PUBLIC";
    }
    size_t at = c.arguments.empty() ? c.open + 1 : c.arguments.back().second;
    out[f].edits.push_back(insertion(texts[f], at, (keyword.empty() ? "" : " " + keyword) + " Fabric::fabric", why));
  };

  bool linked = false;
  if (links) {
    for (const LibTorchLinkSite& site : links->sites) {
      std::string names;
      for (const std::string& t : site.targets) names += (names.empty() ? "" : ", ") + t;
      size_t f = 0;
      while (f < paths.size() && paths[f] != site.file) ++f;
      const Command* command = nullptr;
      if (f < paths.size())
        for (const Command& c : parsed[f]) {
          if (lineAt(texts[f], c.begin) > site.line) break;
          if (c.name == "link_libraries") command = &c;  // the directory's, for the targets made after it
          if (lineAt(texts[f], c.begin) != site.line) continue;
          if (isLinkCommand(c)) command = &c;
          // A target made after link_libraries(...) gets its list: CMake
          // names the add_executable; the edit goes to the link_libraries.
          else if (c.name != "add_executable" && c.name != "add_library")
            command = nullptr;
          break;
        }
      if (command) {
        linked = true;
        linkFabric(f, *command, !site.onlyExecutables);
        continue;
      }
      // CMake says LibTorch comes from here, but no edit can go there: a file
      // outside the project, or a command other than a link list.
      if (out.empty()) continue;
      size_t noteFile = f < paths.size() ? f : firstTorchFile;
      unsigned noteLine = f < paths.size() ? site.line
                          : firstTorch     ? lineAt(texts[firstTorchFile], firstTorch->begin)
                                           : 1;
      out[noteFile].notes.push_back(
          {noteLine, "CMake links LibTorch to " + names + " at " + site.file + ":" + std::to_string(site.line) +
                         ", where fabricize cannot add the runtime: link Fabric::fabric to " + names + " by hand"});
    }
  } else {
    for (size_t f = 0; f < texts.size(); ++f)
      for (const Command& c : parsed[f]) {
        if (!isLinkCommand(c)) continue;
        bool spellsTorch = false;
        for (size_t a = firstItem(c); a < c.arguments.size(); ++a)
          spellsTorch = spellsTorch || namesLibTorch(argumentOf(f, c, a));
        if (!spellsTorch) continue;
        linked = true;
        linkFabric(f, c, true);
      }
  }
  if (!firstTorch) {
    if (texts.empty()) return out;
    out[0].notes.push_back({1,
                            "no CMake file of this project does find_package(Torch): add "
                            "find_package(Fabric CONFIG REQUIRED) and link Fabric::fabric to the "
                            "training target by hand"});
    return out;
  }
  if (!linked && !(links && links->libTorchTargets > 0))
    out[firstTorchFile].notes.push_back(
        {lineAt(texts[firstTorchFile], firstTorch->begin),
         links ? "CMake links LibTorch to no target of this project: link Fabric::fabric to the training target "
                 "by hand"
               : "no target_link_libraries of this project links ${TORCH_LIBRARIES}: link Fabric::fabric to the "
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
      if (llvm::sys::fs::is_regular_file(lists) && !llvm::sys::fs::exists(cache)) found.insert(std::string(lists));
      if (dir == root || dir.size() <= root.size()) break;
      dir = llvm::sys::path::parent_path(dir).str();
    }
  }
  return {found.begin(), found.end()};
}

}  // namespace fabricize
