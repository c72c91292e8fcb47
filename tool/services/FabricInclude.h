// Where <fabric/fabric.h> goes in a migration: into each file whose rules
// asked for it, unless a project header the file includes (directly or
// through others) includes it once migrated: trainer.cpp includes
// trainer.h, which gets it for its Fabric member. migrate, lint --fix and
// the LSP server's "migrate this file" render through here, so all three
// add the include to the same files.
#pragma once

#include "edits/EditSet.h"
#include "engine/Engine.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace fabricize {

// The project files `path` includes with `#include "..."`, resolved
// against its directory (absolute paths of files that exist).
std::vector<std::string> quotedIncludes(const std::string& path, const std::string& text);

// A file as the migration writes it.
struct RenderedFile {
  std::string text;
  MergedEdits merged;  // the edits applied, and those dropped as overlapping
};

// The project headers a file includes: (its path, its text) -> their paths.
using IncludeGraph = std::function<std::vector<std::string>(const std::string&, const std::string&)>;

// Renders every file of `files` (absolute path -> its text and the rules'
// edits). Headers that are not in `files` count as they are: their text
// from `unsaved` (an editor's buffers), else from disk. Only headers under
// `root` are followed; a file's headers are its quotedIncludes() unless
// `includesOf` says (the clang-tidy plugin knows the preprocessor's).
std::map<std::string, RenderedFile> renderMigration(const std::map<std::string, FileResult>& files,
                                                    const std::string& root,
                                                    const std::map<std::string, std::string>& unsaved = {},
                                                    const IncludeGraph& includesOf = nullptr);

}  // namespace fabricize
