// What an engine run is told: the project root, extra compiler flags, the
// PCH cache, threads, an editor's unsaved buffers, cancellation. Engine.h
// runs with it; UnitParse.h parses one translation unit with it.
#pragma once

#include "engine/Pch.h"
#include "engine/Preamble.h"

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace fabricize {

struct EngineOptions {
  std::string projectRoot;                  // absolute; nothing outside it is edited
  std::vector<std::string> extraArguments;  // appended to every compile command
  std::string resourceDir;                  // Clang's builtin headers
  PchOptions pch;                           // a cached LibTorch PCH; empty cacheDir: none
  unsigned jobs = 1;                        // translation units parsed at once
  // Absolute path -> text parsed instead of the file on disk (an editor's
  // unsaved buffers: the document and the headers open beside it).
  std::map<std::string, std::string> unsavedFiles;
  // Called before each translation unit starts: (1-based index, count, path).
  std::function<void(size_t, size_t, const std::string&)> progress;
  // Whether edits in a function need the Fabric there (the catalogue's);
  // false for rules that never call it (verify's instrumentation).
  bool editsNeedFabric = true;
  // Set by another thread to stop early (an editor's text went stale): the
  // parse stops at the next declaration or function body, nothing is matched
  // and the result says `cancelled`.
  const std::atomic<bool>* cancelled = nullptr;
  // Set: each source's own preamble (its includes, chained on the LibTorch
  // PCH) is kept here and reused while edits leave the includes alone (the
  // language server's; Preamble.h).
  PreambleCache* preambles = nullptr;
  // False: a parse with the PCH that fails on errors in the user's own files
  // is not tried again without it (they are the text's errors: an editor's
  // text mid-edit). True: retried, so that the errors are printed in full
  // and a PCH at fault is ruled out (migrate, lint).
  bool retryWithoutPch = true;
};

}  // namespace fabricize
