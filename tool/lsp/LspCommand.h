// The `lsp` subcommand (LspCommand.cpp, over the protocol in LspServer.cpp).
// Only main.cpp includes this.
#pragma once

namespace fabricize {

// `fabricize lsp ...`; argv[0] is the subcommand.
int runLsp(int argc, const char** argv);

}  // namespace fabricize
