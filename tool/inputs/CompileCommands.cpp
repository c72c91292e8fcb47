#include "inputs/CompileCommands.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <utility>

namespace fabricize {

namespace {

bool isHeader(llvm::StringRef file) {
  llvm::StringRef extension = llvm::sys::path::extension(file);
  return extension == ".h" || extension == ".hh" || extension == ".hpp" || extension == ".hxx" || extension == ".cuh" ||
         extension == ".inl";
}

// A compile_commands.json (or compile_flags.txt) found for the file is used
// when it lists the file, or, for a header, with the command of the source
// most like it (LibTooling's interpolation, as clangd does); otherwise the
// file is parsed as a LibTorch program.
class DetectedOrDefaultDatabase : public clang::tooling::CompilationDatabase {
 public:
  DetectedOrDefaultDatabase(std::unique_ptr<clang::tooling::CompilationDatabase> detected,
                            std::unique_ptr<clang::tooling::CompilationDatabase> defaults)
      : detected_(std::move(detected)), defaults_(std::move(defaults)) {}
  std::vector<clang::tooling::CompileCommand> getCompileCommands(llvm::StringRef file) const override {
    if (detected_) {
      auto commands = detected_->getCompileCommands(file);
      if (!commands.empty() && (commands.front().Heuristic.empty() || isHeader(file))) return commands;
    }
    return defaults_->getCompileCommands(file);
  }

 private:
  std::unique_ptr<clang::tooling::CompilationDatabase> detected_, defaults_;
};

}  // namespace

std::unique_ptr<clang::tooling::CompilationDatabase> explicitDatabase(bool sawDashDash,
                                                                      const std::vector<std::string>& flags,
                                                                      const std::string& buildPath,
                                                                      const DriverQueryOptions& query,
                                                                      std::string& error) {
  error.clear();
  if (sawDashDash) return std::make_unique<clang::tooling::FixedCompilationDatabase>(".", flags);
  if (buildPath.empty()) return nullptr;
  std::string why;
  auto database = clang::tooling::CompilationDatabase::loadFromDirectory(buildPath, why);
  if (!database) error = "cannot read compile_commands.json in " + buildPath + ": " + why;
  return withDriverIncludes(std::move(database), query);
}

std::unique_ptr<clang::tooling::CompilationDatabase> findDatabaseFor(const std::string& file, std::string& foundIn) {
  llvm::SmallString<256> folder(file);
  llvm::sys::fs::make_absolute(folder);
  llvm::sys::path::remove_filename(folder);
  while (!folder.empty()) {
    for (const char* sub : {"", "build"}) {
      llvm::SmallString<256> candidate(folder);
      if (*sub != '\0') llvm::sys::path::append(candidate, sub);
      std::string error;
      if (auto database = clang::tooling::CompilationDatabase::loadFromDirectory(candidate, error)) {
        foundIn = std::string(candidate);
        return database;
      }
    }
    // A copy: the parent is a view into `folder`, which assigning reuses.
    std::string parent = llvm::sys::path::parent_path(folder).str();
    if (parent == folder.str()) break;
    folder = parent;
  }
  return nullptr;
}

std::unique_ptr<clang::tooling::CompilationDatabase> databaseFor(const std::string& file,
                                                                 const DriverQueryOptions& query,
                                                                 const std::string& commandsDir) {
  std::unique_ptr<clang::tooling::CompilationDatabase> found;
  if (!commandsDir.empty()) {
    std::string error;
    found = clang::tooling::CompilationDatabase::loadFromDirectory(commandsDir, error);
  } else {
    std::string foundIn;
    found = findDatabaseFor(file, foundIn);
  }
  std::vector<std::string> defaults = {FABRIC_DEFAULT_COMPILE_FLAGS};
  return std::make_unique<DetectedOrDefaultDatabase>(
      withDriverIncludes(std::move(found), query),
      std::make_unique<clang::tooling::FixedCompilationDatabase>(".", defaults));
}

DriverQueryOptions defaultDriverQuery() {
  DriverQueryOptions query;
  query.resourceDir = FABRIC_CLANG_RESOURCE_DIR;
  return query;
}

void reportUnparsed(llvm::raw_ostream& os, const std::string& prefix, const std::string& shownPath,
                    const std::string& path, const clang::tooling::CompilationDatabase& database,
                    const std::string& consequence) {
  os << prefix << "error: " << shownPath << ": does not compile (see the errors above); " << consequence << "\n";
  std::vector<clang::tooling::CompileCommand> commands = database.getCompileCommands(path);
  if (commands.empty()) return;
  std::string hint = driverIncludesHint(commands.front());
  if (!hint.empty()) os << prefix << "note: " << hint << "\n";
  os << prefix
     << "note: if the project's own compiler builds it, Clang may need a flag that compiler does not "
        "(a limit, a define, a language option): give it with --extra-arg=<flag>, once per flag\n";
}

}  // namespace fabricize
