// Engine setup: the options every subcommand's analysis starts from (Clang's
// builtin headers, the runtime's headers, the PCH cache). Each subcommand
// then adds its own (jobs, progress, cache limit from its command line).
#pragma once

#include "engine/Engine.h"

#include <string>
#include <vector>

namespace fabricize {

// The options every analysis runs with: Clang's builtin headers and the
// runtime's headers (a migrated program includes <fabric/fabric.h>); the
// PCH cache's size limit from $FABRICIZE_PCH_CACHE_MB (or its default).
// `projectRoot` is also the folder whose include folders the PCH ignores.
// Clang is also given GCC's limits where Clang's are lower (code GCC
// compiles parses), then `extraArgs` (--extra-arg), which come last and win.
EngineOptions engineOptionsFor(const std::string& projectRoot, const char* argv0, bool usePch = true,
                               const std::vector<std::string>& extraArgs = {});

}  // namespace fabricize
