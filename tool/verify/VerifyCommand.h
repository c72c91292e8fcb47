// The `verify` subcommand (VerifyCommand.cpp): builds and runs the original
// program and its migration, and compares what they record. Only main.cpp
// includes this.
#pragma once

namespace fabricize {

// `fabricize verify ...`; argv[0] is the subcommand.
int runVerify(int argc, const char** argv);

}  // namespace fabricize
