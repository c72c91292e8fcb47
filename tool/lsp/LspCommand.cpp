// fabricize lsp: a Language Server over stdio. Each open document is
// analysed with the migrate catalogue on open, change and save; findings are
// published as diagnostics (code = rule id) and offered as quick fixes whose
// edits are the rule's own, plus one source action that migrates the file.
// The protocol is LspServer.cpp; this file is the analysis.
//
// The engine parses the editor's text, not the file on disk: every open
// document is an unsaved buffer (EngineOptions::unsavedFiles) mapped over
// the file system, so the document and the headers edited beside it are
// parsed as the editor holds them, with the document's own compile command.
// Nothing is written to disk.
#include "lsp/LspCommand.h"

#include "services/CommandLine.h"
#include "inputs/CompileCommands.h"
#include "edits/EditSet.h"
#include "engine/Engine.h"
#include "services/EngineSetup.h"
#include "services/FabricInclude.h"
#include "services/Findings.h"
#include "lsp/LspServer.h"
#include "outputs/Output.h"
#include "inputs/Project.h"
#include "inputs/QueryDriver.h"
#include "Rule.h"
#include "edits/RuleSelection.h"

#include "clang/Tooling/CompilationDatabase.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iostream>
#include <thread>

namespace fabricize {

namespace {

// For --log=info: "preamble reused in 3 ms", "preamble above line 52 built
// in 410 ms", "...; the declarations above line 10 do not compile on their own".
std::string describe(const PreambleReport& preamble) {
  std::string note = "preamble ";
  if (preamble.declarationsAboveLine) note += "above line " + std::to_string(preamble.declarationsAboveLine) + " ";
  note += preamble.use == PreambleUse::Reused ? "reused in " : "built in ";
  note += std::to_string(static_cast<long>(preamble.ms + 0.5)) + " ms";
  if (preamble.refusedAboveLine)
    note +=
        "; the declarations above line " + std::to_string(preamble.refusedAboveLine) + " do not compile on their own";
  return note;
}

// The migrate catalogue run on a document's in-memory text.
class CatalogueAnalyser {
 public:
  CatalogueAnalyser(const char* argv0, DriverQueryOptions query, std::string commandsDir, bool usePreambles)
      : argv0_(argv0),
        query_(std::move(query)),
        commandsDir_(std::move(commandsDir)),
        preambles_(usePreambles ? std::make_shared<PreambleCache>() : nullptr) {}

  void operator()(LspDocument& doc, const std::atomic<bool>& cancelled) {
    if (doc.path.empty() || !mayMatchAnyRule(doc.text)) return;
    // The lint's .fabricize.json applies in the editor too; a broken one is shown.
    RuleSelection selection;
    if (!selectionFor(doc.path, selection, doc.configError)) selection = RuleSelection{};

    const std::string path = absolutePath(doc.path);
    auto database = databaseFor(path, query_, commandsDir_);
    const std::string root = projectRootForFile(path, commandsDir_);
    EngineOptions options = engineOptionsFor(root, argv0_);
    // The PCH ignores the include folders of the document's own project.
    options.pch.projectDirs = {root};
    for (const auto& [open, text] : doc.openBuffers) options.unsavedFiles[absolutePath(open)] = text;
    options.unsavedFiles[path] = doc.text;
    options.cancelled = &cancelled;
    options.preambles = preambles_.get();
    options.retryWithoutPch = false;  // "does not compile" needs no second parse to confirm
    EngineResult result = runRules(catalogue_, *database, {path}, options);
    if (result.preamble.use != PreambleUse::None) doc.analysisNote = describe(result.preamble);
    if (result.cancelled) {
      doc.cancelled = true;
      return;
    }
    if (!result.failedSources.empty()) {
      doc.parsed = false;
      return;
    }
    for (LintFinding& f : findingsOf(result))
      if (f.file == path && selection.admits(f.ruleId) && !isSuppressed(doc.text, f.line, f.ruleId)) {
        f.file = doc.path;
        doc.findings.push_back(std::move(f));
      }
    // Rendered as migrate renders the project: no include where a header of
    // the project (as migrated, or as the editor holds it) brings it.
    if (result.files.count(path)) {
      std::map<std::string, RenderedFile> rendered = renderMigration(result.files, root, options.unsavedFiles);
      doc.migrateEdits = std::move(rendered.at(path).merged.edits);
    }
  }

 private:
  const char* argv0_;
  DriverQueryOptions query_;
  std::string commandsDir_;  // --compile-commands-dir; empty: search as clangd does
  // Shared by the worker threads (and the copies std::function makes).
  std::shared_ptr<PreambleCache> preambles_;
  std::vector<Rule> catalogue_ = buildCatalogue(FabricOptions{});
};

}  // namespace

int runLsp(int argc, const char** argv) {
  CommonFlags common;
  std::string commandsDir;
  bool noPreamble = false;
  LspServerOptions serverOptions;
  serverOptions.workers = std::clamp(std::thread::hardware_concurrency(), 1u, 2u);
  // A whole number option's value in [low, high], or a clear error.
  auto whole = [](const char* name, unsigned low, unsigned high, unsigned& value) {
    return [=, &value](const std::string& digits) -> std::string {
      if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos ||
          std::stoul(digits) < low || std::stoul(digits) > high)
        return std::string(name) + " takes a whole number from " + std::to_string(low) + " to " + std::to_string(high) +
               ", got '" + digits + "'";
      value = static_cast<unsigned>(std::stoul(digits));
      return "";
    };
  };
  CommandLine line(
      "usage: fabricize lsp [options]\n"
      "  A Language Server on stdin/stdout (JSON-RPC, Content-Length framed).\n"
      "  Diagnostics and quick fixes from the migrate rules; see docs/lsp.md.\n");
  line.option(
      {"--compile-commands-dir"}, "dir",
      [&commandsDir](const std::string& value) -> std::string {
        commandsDir = absolutePath(value);
        std::string error;
        if (!clang::tooling::CompilationDatabase::loadFromDirectory(commandsDir, error))
          return "--compile-commands-dir: no compile_commands.json or compile_flags.txt can be read in " + commandsDir +
                 ": " + error;
        return "";
      },
      "the folder of compile_commands.json (default: as clangd, the file's folder and those above it, each also "
      "with a build/ subfolder)");
  addCommonFlags(line, common, kQueryDriverFlags);
  line.option({"-j"}, "n", whole("-j", 1, 64, serverOptions.workers),
              "analyses at once, each on its own thread (default: the cores, at most 2)");
  line.option({"--coalesce-ms"}, "n", whole("--coalesce-ms", 0, 600000, serverOptions.coalesceMs),
              "an edit cancels a running analysis of an older text that began less than n ms before (default "
              "100): faster keystrokes make one analysis");
  line.option(
      {"--log"}, "info",
      [&serverOptions](const std::string& value) -> std::string {
        if (value != "info") return "--log takes 'info', got '" + value + "'";
        serverOptions.logAnalyses = true;
        return "";
      },
      "one line on stderr per analysis started, published or cancelled");
  line.flag({"--no-preamble"}, noPreamble,
            "parse a document's own includes again at every edit (by default they are precompiled once, chained "
            "on the LibTorch PCH, and reused; so are the declarations above the one being typed in)");
  line.ignore("--stdio");  // editors commonly pass it
  auto fail = [](const std::string& error) {
    llvm::errs() << "fabricize lsp: error: " << error << "\n";
    return 2;
  };
  if (std::optional<int> finished = line.parseOrFinish(argc, argv, 0, fail)) return *finished;
  std::string error;
  CommonSettings settings;
  if (!resolveCommonFlags(common, settings, error)) return fail(error);
  const DriverQueryOptions& query = settings.query;
  const bool usePreambles = !noPreamble;
  std::ios::sync_with_stdio(false);
  LspServer server(std::cin, std::cout, CatalogueAnalyser(argv[0], query, commandsDir, usePreambles), serverOptions);
  return server.serve();
}

}  // namespace fabricize
