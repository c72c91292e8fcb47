// The protocol half of `fabricize lsp`: Content-Length framing, JSON-RPC
// dispatch, open documents, diagnostics and code actions. What a document's
// findings are is the analyser's business (LspCommand.cpp runs the migrate
// catalogue through Clang), so this half depends on neither Clang nor the
// rules and can be fuzzed on its own (test/fuzz/fuzz_lsp.cpp).
#pragma once

#include "edits/LintFinding.h"
#include "lsp/LspProtocol.h"
#include "edits/RuleSelection.h"

#include <atomic>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fabricize {

// Fills a document's findings from its uri, path and text. Once `cancelled`
// turns true (an edit made the text stale) it may stop early, setting
// doc.cancelled. Called from the server's worker threads, several at once.
using LspAnalyser = std::function<void(LspDocument&, const std::atomic<bool>& cancelled)>;

struct LspServerOptions {
  // Analyses run at once, each on its own thread; 0: in the thread that
  // reads the client, one at a time (deterministic: the fuzzer's).
  unsigned workers = 2;
  // An edit cancels a running analysis of an older text of the same
  // document if it started less than this long ago: keystrokes closer than
  // this make one analysis; slower typing still gets diagnostics between
  // keystrokes (an older text's, with its version).
  unsigned coalesceMs = 100;
  bool logAnalyses = false;  // one stderr line per analysis started, published or cancelled
};

// The largest message body the server accepts (larger: a parse error, and
// the body is skipped without being held in memory).
constexpr size_t kMaxLspMessageBytes = size_t(64) << 20;

class LspServer {
 public:
  LspServer(std::istream& in, std::ostream& out, LspAnalyser analyse, LspServerOptions options = {});
  ~LspServer();
  // Serves until `exit` or the end of input. Returns the exit code the
  // protocol asks for: 0 after shutdown, else 1.
  int serve();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace fabricize
