// Writing results: never a half-written file (temp file + rename), never
// into the input tree unless asked to edit in place.
#pragma once

#include <string>

namespace fabricize {

// Writes `contents` to `path` atomically, creating parent directories.
// Returns an empty string on success, else what went wrong.
std::string writeFileAtomically(const std::string& path, const std::string& contents);

bool readFile(const std::string& path, std::string& contents);

}  // namespace fabricize
