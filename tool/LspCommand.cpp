// fabricize lsp: a Language Server over stdio. Each open document is
// analysed with the migrate catalogue on open, change and save; findings are
// published as diagnostics (code = rule id) and offered as quick fixes whose
// edits are the rule's own, plus one source action that migrates the file.
// The protocol is LspServer.cpp; this file is the analysis.
//
// The engine parses files from disk, so the in-memory text is analysed as a
// copy in a temporary directory, compiled with the original file's command
// and able to find the original's neighbouring headers (-iquote).
#include "LspCommand.h"

#include "CompileCommands.h"
#include "EditSet.h"
#include "Engine.h"
#include "EngineSetup.h"
#include "Findings.h"
#include "LspServer.h"
#include "Output.h"
#include "Project.h"
#include "QueryDriver.h"
#include "Rule.h"
#include "RuleSelection.h"

#include "clang/Tooling/CompilationDatabase.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstring>
#include <iostream>

namespace fabricize {

namespace {

// The original file's compile command, pointed at the in-memory copy.
class CopyDatabase : public clang::tooling::CompilationDatabase {
 public:
  CopyDatabase(std::unique_ptr<clang::tooling::CompilationDatabase> inner, std::string original,
               std::string copy)
      : inner_(std::move(inner)), original_(std::move(original)), copy_(std::move(copy)) {}
  std::vector<clang::tooling::CompileCommand> getCompileCommands(llvm::StringRef) const override {
    std::vector<clang::tooling::CompileCommand> commands = inner_->getCompileCommands(original_);
    for (auto& command : commands) {
      for (std::string& arg : command.CommandLine) {
        llvm::SmallString<256> resolved(arg);
        if (!llvm::sys::path::is_absolute(resolved)) {
          resolved = command.Directory;
          llvm::sys::path::append(resolved, arg);
        }
        if (arg == command.Filename || absolutePath(std::string(resolved)) == original_) arg = copy_;
      }
      command.Filename = copy_;
      // Quoted includes still find the original's neighbours. Right after the
      // compiler, so that it lands before any `--`.
      command.CommandLine.insert(std::min(command.CommandLine.begin() + 1, command.CommandLine.end()),
                                 {"-iquote", llvm::sys::path::parent_path(original_).str()});
    }
    return commands;
  }

 private:
  std::unique_ptr<clang::tooling::CompilationDatabase> inner_;
  std::string original_, copy_;
};

// The migrate catalogue run on a document's in-memory text.
class CatalogueAnalyser {
 public:
  CatalogueAnalyser(const char* argv0, DriverQueryOptions query, std::string commandsDir)
      : argv0_(argv0), query_(std::move(query)), commandsDir_(std::move(commandsDir)) {}

  void operator()(LspDocument& doc) {
    if (doc.path.empty() || !mayMatchAnyRule(doc.text)) return;
    // The lint's .fabricize.json applies in the editor too; a broken one is shown.
    RuleSelection selection;
    if (!selectionFor(doc.path, selection, doc.configError)) selection = RuleSelection{};

    llvm::SmallString<128> dir;
    if (llvm::sys::fs::createUniqueDirectory("fabricize-lsp", dir)) {
      llvm::errs() << "fabricize lsp: cannot create a temporary directory\n";
      doc.parsed = false;
      return;
    }
    std::string tempDir = absolutePath(std::string(dir));
    std::string copy = tempDir + "/" + llvm::sys::path::filename(doc.path).str();
    std::string problem = writeFileAtomically(copy, doc.text);
    if (problem.empty()) {
      CopyDatabase database(databaseFor(doc.path, query_, commandsDir_), absolutePath(doc.path), copy);
      EngineOptions options = engineOptionsFor(tempDir, argv0_);
      // The copy's folder is the root edits are confined to; the PCH ignores
      // the include folders of the document's real project.
      options.pch.projectDirs = {projectRootForFile(doc.path)};
      EngineResult result = runRules(catalogue_, database, {copy}, options);
      if (!result.failedSources.empty()) {
        doc.parsed = false;
      } else {
        for (LintFinding& f : findingsOf(result))
          if (f.file == copy && selection.admits(f.ruleId) && !isSuppressed(doc.text, f.line, f.ruleId)) {
            f.file = doc.path;
            doc.findings.push_back(std::move(f));
          }
        auto file = result.files.find(copy);
        if (file != result.files.end())
          renderFixed(doc.text, file->second.edits, file->second.wantsInclude, nullptr, &doc.migrateEdits);
      }
    } else {
      llvm::errs() << "fabricize lsp: " << problem << "\n";
      doc.parsed = false;
    }
    llvm::sys::fs::remove_directories(tempDir);
  }

 private:
  const char* argv0_;
  DriverQueryOptions query_;
  std::string commandsDir_;  // --compile-commands-dir; empty: search as clangd does
  std::vector<Rule> catalogue_ = buildCatalogue(FabricOptions{});
};

}  // namespace

int runLsp(int argc, const char** argv) {
  DriverQueryOptions query = defaultDriverQuery();
  std::string commandsDir;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      llvm::outs() << "usage: fabricize lsp [--compile-commands-dir=<dir>] [--query-driver=<globs>] [--no-query-driver]\n"
                      "  A Language Server on stdin/stdout (JSON-RPC, Content-Length framed).\n"
                      "  Diagnostics and quick fixes from the migrate rules; see docs/lsp.md.\n"
                      "  --compile-commands-dir: the folder of compile_commands.json (default: as clangd,\n"
                      "  the file's folder and those above it, each also with a build/ subfolder).\n"
                      "  --query-driver: compilers outside the system folders that may be asked for their\n"
                      "  include folders (as clangd's); --no-query-driver: none is.\n";
      return 0;
    }
    if (arg == "--no-query-driver") {
      query.enabled = false;
      continue;
    }
    if (llvm::StringRef(arg).starts_with("--compile-commands-dir=")) {
      commandsDir = absolutePath(arg.substr(strlen("--compile-commands-dir=")));
      std::string error;
      if (!clang::tooling::CompilationDatabase::loadFromDirectory(commandsDir, error)) {
        llvm::errs() << "fabricize lsp: error: --compile-commands-dir: no compile_commands.json or "
                        "compile_flags.txt can be read in " << commandsDir << ": " << error << "\n";
        return 2;
      }
      continue;
    }
    if (llvm::StringRef(arg).starts_with("--query-driver=")) {
      std::string error;
      if (!parseQueryDriverGlobs(arg.substr(strlen("--query-driver=")), query.globs, error)) {
        llvm::errs() << "fabricize lsp: error: " << error << "\n";
        return 2;
      }
      continue;
    }
    if (arg != "--stdio") {  // editors commonly pass --stdio
      llvm::errs() << "fabricize lsp: error: unknown option '" << arg << "'\n";
      return 2;
    }
  }
  std::ios::sync_with_stdio(false);
  LspServer server(std::cin, std::cout, CatalogueAnalyser(argv[0], query, commandsDir));
  return server.serve();
}

}  // namespace fabricize
