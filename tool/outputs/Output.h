// Writing results: never a half-written file (temp file + rename), never
// into the input tree unless asked to edit in place.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace fabricize {

// Writes `contents` to `path` atomically, creating parent directories.
// Returns an empty string on success, else what went wrong.
std::string writeFileAtomically(const std::string& path, const std::string& contents);

// Writes every (path, contents) or none: each goes to a temporary file next
// to its target first, and only when all of them are written are they
// renamed into place. Returns an empty string on success, else what went
// wrong (every temporary file is then removed and no target changed).
std::string writeFilesAtomically(const std::vector<std::pair<std::string, std::string>>& files);

bool readFile(const std::string& path, std::string& contents);

}  // namespace fabricize
