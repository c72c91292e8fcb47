// The `lint` subcommand (LintCommand.cpp). Only main.cpp includes this.
#pragma once

namespace fabricize {

// `fabricize lint ...`; argv[0] is the subcommand.
int runLint(int argc, const char** argv);

}  // namespace fabricize
