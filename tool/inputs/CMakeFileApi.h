// What CMake itself knows about a configured build, through its File API
// (cmake-file-api(7)): which targets link LibTorch, and the command
// invocation that brought LibTorch to each. However the project spells its
// link lines (variables, lists, functions, link_libraries, generator
// expressions), CMake has already evaluated them; fabricize reads the result
// rather than guessing from the text.
#pragma once

#include "inputs/Project.h"

#include <optional>
#include <string>
#include <vector>

namespace fabricize {

struct CodeModel {
  // A command invocation that brings LibTorch to targets that do not link
  // the Fabric runtime yet.
  struct LibTorchLink {
    std::string file;                  // absolute
    unsigned line = 0;                 // of the command's name
    std::string command;               // "target_link_libraries", "link_libraries", or a function of the project
    std::vector<std::string> targets;  // the targets it brings LibTorch to
    bool onlyExecutables = true;       // all of them executables: the runtime need not propagate
    std::vector<std::string> sources;  // theirs, absolute
  };
  std::vector<LibTorchLink> libTorchLinks;
  // Targets that link LibTorch, with or without the runtime.
  std::vector<std::string> libTorchTargets;
  // Those that also link the runtime (a migrated project).
  std::vector<std::string> fabricTargets;
};

// Reads the codemodel of `build` (a CMake build directory). When the build
// has no reply for fabricize's query, or an older one than its configure
// inputs, the query is written (<build>/.cmake/api/v1/query/client-fabricize/)
// and CMake re-runs its configure step on the build, as IDEs do. nullopt,
// with `why`, when that cannot be done (not a CMake build, CMake older than
// 3.14, a configure step that fails).
std::optional<CodeModel> readCodeModel(const BuildTree& build, std::string& why, bool verbose = false);

}  // namespace fabricize
