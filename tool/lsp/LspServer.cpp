#include "lsp/LspServer.h"

#include "lsp/LspProtocol.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

namespace fabricize {

using nlohmann::json;

// One open document: the client's latest text, and the last analysis that
// completed (its own text: positions are computed against what was analysed).
struct OpenDocument {
  LspDocument latest;    // uri, path, text, version as the client has them
  LspDocument analysed;  // a snapshot with its findings; empty before the first analysis
  // Generations come from one counter for every document, bumped by each
  // open and change: an analysis of a closed and reopened document never
  // matches the new one.
  uint64_t generation = 0, analysedGeneration = 0, publishedGeneration = 0;
  struct Running {
    uint64_t generation;
    std::shared_ptr<std::atomic<bool>> cancel;
    std::chrono::steady_clock::time_point started;
  };
  std::vector<Running> running;
  bool stale() const { return analysedGeneration != generation; }
  bool analysing(uint64_t g) const {
    for (const Running& r : running)
      if (r.generation == g) return true;
    return false;
  }
};

// An analysis handed to a worker.
struct AnalysisJob {
  LspDocument snapshot;
  uint64_t generation;
  std::shared_ptr<std::atomic<bool>> cancel;
};

struct LspServer::State {
  std::istream& in;
  std::ostream& out;
  LspAnalyser analyse_;
  LspServerOptions options;
  // `lock` guards everything below and the output stream: the reading thread
  // holds it while it handles a message, workers while they publish.
  std::mutex lock;
  std::condition_variable changed;  // a job queued, an analysis finished, stopping
  std::map<std::string, OpenDocument> documents;
  std::deque<AnalysisJob> jobs;
  unsigned idleWorkers = 0;
  uint64_t nextGeneration = 1;
  bool stopping = false;
  std::vector<std::thread> workers;
  bool initialized = false, shutdown = false;

  State(std::istream& i, std::ostream& o, LspAnalyser a, LspServerOptions opts)
      : in(i), out(o), analyse_(std::move(a)), options(opts), idleWorkers(opts.workers) {
    // Reading must not flush the output (std::cin is tied to std::cout): a
    // worker may be writing it, under the lock the reader does not hold then.
    in.tie(nullptr);
    for (unsigned w = 0; w < options.workers; ++w) workers.emplace_back([this] { work(); });
  }

  // Running analyses are cancelled, the workers joined before anything they
  // use goes away.
  ~State() {
    {
      std::lock_guard<std::mutex> guard(lock);
      stopping = true;
      for (auto& [uri, doc] : documents)
        for (auto& r : doc.running) r.cancel->store(true);
      changed.notify_all();
    }
    for (std::thread& t : workers) t.join();
  }

  static json error(int code, const std::string& message) { return {{"code", code}, {"message", message}}; }

  void reply(const json& id, const json& errorObject) {
    send({{"jsonrpc", "2.0"}, {"id", id}, {"error", errorObject}});
  }

  void send(const json& message) {
    // Source text may hold bytes that are not UTF-8: replaced, never thrown.
    std::string body = message.dump(-1, ' ', false, json::error_handler_t::replace);
    out << "Content-Length: " << body.size() << "\r\n\r\n" << body;
    out.flush();
  }

  void log(const LspDocument& doc, const char* what, std::chrono::steady_clock::time_point started) {
    if (!options.logAnalyses) return;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    std::string line = "fabricize lsp: " + std::string(what) + " " + doc.uri + " version " +
                       std::to_string(doc.version) + " (" + std::to_string(ms.count()) + " ms" +
                       (doc.analysisNote.empty() ? "" : ", " + doc.analysisNote) + ")\n";
    std::cerr << line << std::flush;
  }

  // Content-Length framing; other headers are ignored. False at end of input.
  bool readMessage(std::string& body) {
    for (;;) {
      long long length = -1;
      bool sawHeader = false, badLength = false;
      std::string line;
      while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) {
          if (sawHeader) break;
          continue;
        }
        sawHeader = true;
        std::string lower = line.substr(0, 15);
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (lower == "content-length:") {
          std::string digits = line.substr(15);
          digits.erase(0, digits.find_first_not_of(" \t"));
          digits.erase(digits.find_last_not_of(" \t") + 1);
          if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos)
            badLength = true;
          else
            length = std::stoll(digits);
        }
      }
      if (!in) return false;
      if (badLength || length < 0) {
        reply(nullptr, error(kParseError, "missing or invalid Content-Length header"));
        continue;
      }
      // Read what arrives rather than reserving what the header claims.
      body.clear();
      bool tooLarge = static_cast<unsigned long long>(length) > kMaxLspMessageBytes;
      char chunk[1 << 16];
      for (long long left = length; left > 0;) {
        std::streamsize want = static_cast<std::streamsize>(std::min<long long>(left, sizeof chunk));
        in.read(chunk, want);
        if (in.gcount() != want) return false;
        if (!tooLarge) body.append(chunk, static_cast<size_t>(want));
        left -= want;
      }
      if (tooLarge) {
        reply(nullptr, error(kParseError, "message of " + std::to_string(length) + " bytes is larger than the " +
                                              std::to_string(kMaxLspMessageBytes) + " the server accepts"));
        continue;
      }
      return true;
    }
  }

  int serve() {
    std::string body;
    while (readMessage(body)) {
      json message;
      try {
        message = json::parse(body);
      } catch (const json::exception& e) {
        std::lock_guard<std::mutex> guard(lock);
        reply(nullptr, error(kParseError, std::string("parse error: ") + e.what()));
        continue;
      }
      std::unique_lock<std::mutex> guard(lock);
      if (!message.is_object() || !message.contains("method") || !message["method"].is_string()) {
        if (message.is_object() && message.contains("result")) continue;  // a response to us: none expected
        json id = message.is_object() && message.contains("id") ? message["id"] : json(nullptr);
        reply(id, error(kInvalidRequest, "not a JSON-RPC request: no method"));
        continue;
      }
      std::string method = message["method"];
      bool isRequest = message.contains("id");
      json id = isRequest ? message["id"] : json(nullptr);
      if (isRequest && !id.is_string() && !id.is_number_integer() && !id.is_null()) {
        reply(nullptr, error(kInvalidRequest, "a request id is a string or an integer"));
        continue;
      }
      json params = message.value("params", json::object());
      if (method == "exit") return shutdown ? 0 : 1;
      try {
        json result;
        std::optional<json> failure = handle(method, params, result, isRequest, guard);
        if (isRequest) {
          if (failure)
            reply(id, *failure);
          else
            send({{"jsonrpc", "2.0"}, {"id", id}, {"result", result}});
        }
      } catch (const std::exception& e) {  // json's type and key errors, InvalidParams
        if (isRequest)
          reply(id, error(kInvalidParams, std::string("invalid params: ") + e.what()));
        else
          std::cerr << "fabricize lsp: ignored " << method << ": " << e.what() << "\n";
      }
      // A burst of edits (keystrokes that arrived while the server was
      // busy) is read to its end first: one analysis of the last text.
      if (!inputPending()) startAnalyses(guard);
    }
    // End of input: what is pending is analysed and published first.
    std::unique_lock<std::mutex> guard(lock);
    for (;;) {
      startAnalyses(guard);
      bool settled = true;
      for (const auto& [uri, doc] : documents) settled = settled && !doc.stale() && doc.running.empty();
      if (settled) break;
      changed.wait(guard);
    }
    return shutdown ? 0 : 1;
  }

  // Whether the client has sent more than this server has read: typing in
  // progress. (A pipe's unread bytes, through the stream buffer.)
  bool inputPending() { return in.rdbuf()->in_avail() > 0; }

  // Starts an analysis of each document whose latest text has none, as far
  // as workers are idle (a worker that finishes starts the next). Without
  // workers the analyses run here, one after the other. The lock is held.
  void startAnalyses(std::unique_lock<std::mutex>& guard) {
    for (auto& [uri, doc] : documents) {
      if (!doc.stale() || doc.analysing(doc.generation)) continue;
      if (options.workers > 0 && idleWorkers == 0) return;
      AnalysisJob job{doc.latest, doc.generation, std::make_shared<std::atomic<bool>>(false)};
      job.snapshot.openBuffers.clear();
      for (const auto& [otherUri, open] : documents)
        if (!open.latest.path.empty()) job.snapshot.openBuffers[open.latest.path] = open.latest.text;
      doc.running.push_back({doc.generation, job.cancel, std::chrono::steady_clock::now()});
      if (options.workers == 0) {
        run(job, guard);
        continue;
      }
      --idleWorkers;
      jobs.push_back(std::move(job));
      changed.notify_all();
    }
  }

  void work() {
    std::unique_lock<std::mutex> guard(lock);
    for (;;) {
      changed.wait(guard, [&] { return stopping || !jobs.empty(); });
      if (stopping) return;
      AnalysisJob job = std::move(jobs.front());
      jobs.pop_front();
      run(job, guard);
      ++idleWorkers;
      startAnalyses(guard);
    }
  }

  // Analyses outside the lock, then keeps and publishes the result unless it
  // was cancelled or a newer one came first.
  void run(AnalysisJob& job, std::unique_lock<std::mutex>& guard) {
    auto started = std::chrono::steady_clock::now();
    log(job.snapshot, "analysing", started);
    guard.unlock();
    LspDocument& doc = job.snapshot;
    doc.findings.clear();
    doc.migrateEdits.clear();
    doc.parsed = true;
    doc.configError.clear();
    doc.cancelled = false;
    doc.analysisNote.clear();
    if (!job.cancel->load()) analyse_(doc, *job.cancel);
    doc.openBuffers.clear();
    guard.lock();
    auto it = documents.find(doc.uri);
    if (it != documents.end()) {
      auto& running = it->second.running;
      running.erase(std::remove_if(running.begin(), running.end(),
                                   [&](const OpenDocument::Running& r) { return r.cancel == job.cancel; }),
                    running.end());
    }
    changed.notify_all();
    if (job.cancel->load() || doc.cancelled) {
      log(doc, "cancelled (a newer text superseded it)", started);
      return;
    }
    if (it == documents.end() || job.generation <= it->second.analysedGeneration) return;
    OpenDocument& open = it->second;
    open.analysed = std::move(doc);
    open.analysedGeneration = job.generation;
    if (job.generation > open.publishedGeneration) {
      publish(open.analysed);
      open.publishedGeneration = job.generation;
      log(open.analysed, "published", started);
    }
  }

  std::optional<json> handle(const std::string& method, const json& params, json& result, bool isRequest,
                             std::unique_lock<std::mutex>& guard) {
    if (method == "initialize") {
      initialized = true;
      result = {{"capabilities",
                 {{"textDocumentSync", {{"openClose", true}, {"change", 1}, {"save", {{"includeText", true}}}}},
                  {"codeActionProvider", {{"codeActionKinds", {"quickfix", "source.fabricize.migrate"}}}}}},
                {"serverInfo", {{"name", "fabricize"}, {"version", FABRICIZE_VERSION}}}};
      return std::nullopt;
    }
    if (!initialized) {
      if (isRequest) return error(kServerNotInitialized, "initialize first");
      return std::nullopt;
    }
    if (shutdown && isRequest) return error(kInvalidRequest, "the server is shutting down");
    if (method == "initialized" || method.compare(0, 2, "$/") == 0) return std::nullopt;
    if (method == "shutdown") {
      shutdown = true;
      result = nullptr;
      return std::nullopt;
    }
    if (!params.is_object()) throw InvalidParams("params must be an object");
    if (method == "textDocument/didOpen") {
      const json& item = params.at("textDocument");
      std::string uri = stringField(item, "uri"), text = stringField(item, "text");
      OpenDocument& doc = documents[uri];
      for (auto& r : doc.running) r.cancel->store(true);  // opened again: what ran is for the old one
      doc.latest.uri = uri;
      doc.latest.path = pathFromUri(uri);
      doc.latest.text = std::move(text);
      doc.latest.version = versionOf(item);
      doc.generation = nextGeneration++;
      return std::nullopt;
    }
    if (method == "textDocument/didChange" || method == "textDocument/didSave") {
      auto it = documents.find(stringField(params.at("textDocument"), "uri"));
      if (it == documents.end()) return std::nullopt;
      OpenDocument& doc = it->second;
      if (method == "textDocument/didChange") {
        // Full sync: the last change holds the whole text.
        const json& changes = params.at("contentChanges");
        if (!changes.is_array()) throw InvalidParams("'contentChanges' must be an array");
        if (!changes.empty()) doc.latest.text = stringField(changes.back(), "text");
        doc.latest.version = versionOf(params.at("textDocument"));
      } else if (params.contains("text")) {
        doc.latest.text = stringField(params, "text");
      }
      doc.generation = nextGeneration++;
      // An analysis that has only just started is not worth finishing.
      auto now = std::chrono::steady_clock::now();
      for (auto& r : doc.running)
        if (now - r.started < std::chrono::milliseconds(options.coalesceMs)) r.cancel->store(true);
      return std::nullopt;
    }
    if (method == "textDocument/didClose") {
      std::string uri = stringField(params.at("textDocument"), "uri");
      auto it = documents.find(uri);
      if (it != documents.end())
        for (auto& r : it->second.running) r.cancel->store(true);
      documents.erase(uri);
      send({{"jsonrpc", "2.0"},
            {"method", "textDocument/publishDiagnostics"},
            {"params", {{"uri", uri}, {"diagnostics", json::array()}}}});
      return std::nullopt;
    }
    if (method == "textDocument/codeAction") {
      result = codeActions(params, guard);
      return std::nullopt;
    }
    if (isRequest) return error(kMethodNotFound, "method not found: " + method);
    return std::nullopt;  // unknown notifications are ignored, as the protocol asks
  }

  static long long versionOf(const json& item) {
    return item.contains("version") && item["version"].is_number_integer() ? item["version"].get<long long>() : -1;
  }

  void publish(const LspDocument& doc) {
    json diagnostics = json::array();
    if (!doc.parsed)
      diagnostics.push_back(fileLevelDiagnostic("parse-error",
                                                "fabricize: this file does not compile with its compile command, so it "
                                                "was not checked for Fabric migrations (see the server log)"));
    if (!doc.configError.empty())
      diagnostics.push_back(
          fileLevelDiagnostic("config-error", "fabricize: " + doc.configError + " (ignored: every rule applies)"));
    for (const LintFinding& f : doc.findings) diagnostics.push_back(diagnosticOf(doc, f));
    json published = {{"uri", doc.uri}, {"diagnostics", diagnostics}};
    // The version analysed: a client can tell which text the diagnostics are for.
    if (doc.version >= 0) published["version"] = doc.version;
    send({{"jsonrpc", "2.0"}, {"method", "textDocument/publishDiagnostics"}, {"params", published}});
  }

  json codeActions(const json& params, std::unique_lock<std::mutex>& guard) {
    json actions = json::array();
    std::string uri = stringField(params.at("textDocument"), "uri");
    auto it = documents.find(uri);
    if (it == documents.end()) return actions;
    // Fixes for the text the client has, never for an older one: its
    // analysis is awaited (no edit can arrive meanwhile: this thread reads them).
    while (it->second.stale()) {
      startAnalyses(guard);
      if (!it->second.stale()) break;
      changed.wait(guard);
      it = documents.find(uri);
      if (it == documents.end()) return actions;
    }
    const LspDocument& doc = it->second.analysed;
    unsigned firstLine = positionField(params.at("range").at("start"), "line");
    unsigned lastLine = positionField(params.at("range").at("end"), "line");
    std::vector<std::string> only;
    if (params.contains("context") && params["context"].is_object() && params["context"].contains("only"))
      only = params["context"]["only"].get<std::vector<std::string>>();
    auto wanted = [&](const std::string& kind) {
      if (only.empty()) return true;
      for (const std::string& k : only)
        if (kind == k || kind.compare(0, k.size() + 1, k + ".") == 0) return true;
      return false;
    };
    appendCodeActions(doc, firstLine, lastLine, wanted, actions);
    return actions;
  }
};

LspServer::LspServer(std::istream& in, std::ostream& out, LspAnalyser analyse, LspServerOptions options)
    : state_(new State(in, out, std::move(analyse), options)) {}

LspServer::~LspServer() = default;

int LspServer::serve() { return state_->serve(); }

}  // namespace fabricize
